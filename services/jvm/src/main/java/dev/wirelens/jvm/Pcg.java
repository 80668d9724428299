package dev.wirelens.jvm;

/** Go's math/rand/v2 PCG (128-bit LCG, DXSM output): the same raw stream as the Go pair's catalog. */
final class Pcg {
    private static final long MUL_HI = 2549297995355413924L;
    private static final long MUL_LO = 4865540595714422341L;
    private static final long INC_HI = 6364136223846793005L;
    private static final long INC_LO = 1442695040888963407L;
    private static final long CHEAP_MUL = 0xda942042e4dd58b5L;

    private long hi;
    private long lo;

    Pcg(long seed1, long seed2) {
        hi = seed1;
        lo = seed2;
    }

    /** The high 64 bits of the unsigned 128-bit product (Math.unsignedMultiplyHigh is JDK 18+). */
    private static long unsignedMultiplyHigh(long a, long b) {
        return Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
    }

    long uint64() {
        // state = state * mul + inc (mod 2^128)
        long nhi = unsignedMultiplyHigh(lo, MUL_LO) + hi * MUL_LO + lo * MUL_HI;
        long nlo = lo * MUL_LO;
        long sum = nlo + INC_LO;
        long carry = Long.compareUnsigned(sum, nlo) < 0 ? 1 : 0;
        nhi = nhi + INC_HI + carry;
        lo = sum;
        hi = nhi;
        long h = nhi;
        h ^= h >>> 32;
        h *= CHEAP_MUL;
        h ^= h >>> 48;
        h *= (sum | 1);
        return h;
    }
}
