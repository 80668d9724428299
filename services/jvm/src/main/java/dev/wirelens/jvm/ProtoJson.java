package dev.wirelens.jvm;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import com.google.protobuf.util.JsonFormat;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * The proto3 JSON mapping as the Go pair writes it (internal/restapi.MarshalJSON):
 * compact, lowerCamel json names, fields in declaration order, int64 as strings, default values
 * left out, doubles in Go's shortest 'f' notation ("25", not "25.0"), strings with only JSON's
 * mandatory escapes ("&" stays "&"). protobuf-java's JsonFormat differs in the last two (Gson's
 * HTML escaping, Java's "25.0"), so printing is done here; parsing is JsonFormat's (unknown
 * fields rejected, as in Go).
 */
final class ProtoJson {
    private ProtoJson() {}

    private static final JsonFormat.Parser PARSER = JsonFormat.parser();

    static byte[] print(Message m) {
        StringBuilder b = new StringBuilder(256);
        message(b, m);
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }

    static <B extends Message.Builder> B parse(byte[] body, B builder) throws InvalidProtocolBufferException {
        PARSER.merge(new String(body, StandardCharsets.UTF_8), builder);
        return builder;
    }

    private static void message(StringBuilder b, Message m) {
        b.append('{');
        boolean first = true;
        for (FieldDescriptor f : m.getDescriptorForType().getFields()) {
            if (f.isRepeated() ? m.getRepeatedFieldCount(f) == 0 : !m.hasField(f)) continue;
            if (!first) b.append(',');
            first = false;
            string(b, f.getJsonName());
            b.append(':');
            if (f.isRepeated()) {
                b.append('[');
                List<?> values = (List<?>) m.getField(f);
                for (int i = 0; i < values.size(); i++) {
                    if (i > 0) b.append(',');
                    value(b, f, values.get(i));
                }
                b.append(']');
            } else {
                value(b, f, m.getField(f));
            }
        }
        b.append('}');
    }

    private static void value(StringBuilder b, FieldDescriptor f, Object v) {
        switch (f.getJavaType()) {
            case STRING -> string(b, (String) v);
            case INT -> b.append((int) (Integer) v);
            case LONG -> b.append('"').append((long) (Long) v).append('"');
            case BOOLEAN -> b.append((boolean) (Boolean) v);
            case DOUBLE -> number(b, (Double) v, false);
            case FLOAT -> number(b, (double) (Float) v, true);
            case MESSAGE -> message(b, (Message) v);
            default -> throw new IllegalArgumentException("ProtoJson: unsupported field type " + f.getJavaType() + " of " + f.getFullName());
        }
    }

    /** Go protojson: 'f' for 1e-6 <= |x| < 1e21, 'e' otherwise, shortest digits. */
    private static void number(StringBuilder b, double x, boolean float32) {
        if (Double.isNaN(x)) { b.append("\"NaN\""); return; }
        if (Double.isInfinite(x)) { b.append(x > 0 ? "\"Infinity\"" : "\"-Infinity\""); return; }
        String shortest = float32 ? Float.toString((float) x) : Double.toString(x);
        BigDecimal d = new BigDecimal(shortest).stripTrailingZeros();
        double abs = Math.abs(x);
        if (abs == 0 || (abs >= 1e-6 && abs < 1e21)) {
            b.append(d.signum() == 0 ? (1 / x < 0 ? "-0" : "0") : d.toPlainString());
        } else {
            // strconv 'e' (two exponent digits at least), then protojson's "e-07" -> "e-7".
            String mant = d.unscaledValue().abs().toString();
            int exp = mant.length() - 1 - d.scale();
            String digits = mant.length() > 1 ? mant.charAt(0) + "." + mant.substring(1) : mant;
            int e = Math.abs(exp);
            String expDigits = exp < 0 ? Integer.toString(e) : (e < 10 ? "0" + e : Integer.toString(e));
            b.append(x < 0 ? "-" : "").append(digits).append('e').append(exp < 0 ? '-' : '+').append(expDigits);
        }
    }

    static void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        b.append('"');
    }

    /** {"code":N,"message":"..."}: the Go pair's error body (encoding/json, so HTML characters escaped). */
    static byte[] error(int code, String message) {
        StringBuilder b = new StringBuilder(64).append("{\"code\":").append(code).append(",\"message\":");
        StringBuilder m = new StringBuilder();
        string(m, message);
        b.append(m.toString().replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")).append('}');
        return b.toString().getBytes(StandardCharsets.UTF_8);
    }
}
