package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/restapi"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

var cat = New()

func fingerprint(t *testing.T, products []*wirelensv1.Product) string {
	t.Helper()
	h := sha256.New()
	for _, p := range products {
		b, err := restapi.MarshalProto(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestDeterministic pins the generated catalog: the same seed gives the same
// bytes in every process and every build. If this fails after a Go upgrade,
// the PCG source changed and every recorded size changes with it.
func TestDeterministic(t *testing.T) {
	all, err := cat.List(context.Background(), Size)
	if err != nil {
		t.Fatal(err)
	}
	again := Generate(Seed, Size)
	if a, b := fingerprint(t, all), fingerprint(t, again); a != b {
		t.Fatalf("two generations differ: %s %s", a, b)
	}
	const golden = "7d905204ea0d3035f8287ef1544228cf2ecb134a28a2d7196c4825be05ad116b"
	if got := fingerprint(t, all); got != golden {
		t.Fatalf("catalog fingerprint = %s, want %s", got, golden)
	}
	if other := Generate([2]uint64{1, 2}, 3); proto.Equal(other[0], all[0]) {
		t.Fatal("another seed gives the same product")
	}
}

func TestProductShape(t *testing.T) {
	p, err := cat.Get(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.ProtoReflect().Descriptor().Fields().Len(); n != 30 {
		t.Fatalf("Product has %d fields, want 30", n)
	}
	if p.GetId() != 1 || p.GetSku() != "SKU-000001" || p.GetName() == "" || len(p.GetTags()) < 2 || len(p.GetBarcode()) != 13 {
		t.Fatalf("product 1 = %v", p)
	}
	for i, want := range []int32{1, 2, Size} {
		p, err := cat.Get(context.Background(), want)
		if err != nil || p.GetId() != want {
			t.Fatalf("Get(%d) = %v, %v (case %d)", want, p.GetId(), err, i)
		}
	}
}

// TestJSONSizes checks E4's sizes: one product ≈ 0.8 KB of JSON, 100
// products ≈ 80 KB, 500 products > 100 KB.
func TestJSONSizes(t *testing.T) {
	ctx := context.Background()
	p, _ := cat.Get(ctx, 1)
	j, err := restapi.MarshalJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(j) < 700 || len(j) > 1100 {
		t.Errorf("GetProduct(1) JSON = %d bytes, want 700..1100", len(j))
	}
	total := 0
	for id := int32(1); id <= Size; id++ {
		p, _ := cat.Get(ctx, id)
		j, _ := restapi.MarshalJSON(p)
		if len(j) < 650 || len(j) > 1000 {
			t.Errorf("product %d JSON = %d bytes, want 650..1000", id, len(j))
		}
		total += len(j)
	}
	if avg := total / Size; avg < 750 || avg > 900 {
		t.Errorf("average product JSON = %d bytes, want 750..900", avg)
	}
	for _, tc := range []struct {
		count    int32
		min, max int
	}{{100, 55_000, 90_000}, {500, 100_001, 700_000}} {
		l, _ := cat.List(ctx, tc.count)
		j, err := restapi.MarshalJSON(&wirelensv1.ListProductsReply{Products: l})
		if err != nil {
			t.Fatal(err)
		}
		if len(j) < tc.min || len(j) > tc.max {
			t.Errorf("ListProducts(%d) JSON = %d bytes, want %d..%d", tc.count, len(j), tc.min, tc.max)
		}
	}
}

func TestGetNotFound(t *testing.T) {
	for _, id := range []int32{0, -1, Size + 1} {
		if _, err := cat.Get(context.Background(), id); apierr.Code(err) != codes.NotFound {
			t.Errorf("Get(%d) err = %v, want NotFound", id, err)
		}
	}
}

func TestList(t *testing.T) {
	l, err := cat.List(context.Background(), 0)
	if err != nil || len(l) != DefaultListCount {
		t.Fatalf("List(0) = %d products, %v", len(l), err)
	}
	for i, p := range l {
		if p.GetId() != int32(i+1) {
			t.Fatalf("List(0)[%d].id = %d", i, p.GetId())
		}
	}
	if l = append(l, nil); cat.products[DefaultListCount] == nil {
		t.Fatal("appending to a List result overwrote the catalog")
	}
	for _, n := range []int32{-1, Size + 1} {
		if _, err := cat.List(context.Background(), n); apierr.Code(err) != codes.InvalidArgument {
			t.Errorf("List(%d) err = %v, want InvalidArgument", n, err)
		}
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := cat.Get(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get err = %v", err)
	}
	if _, err := cat.List(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("List err = %v", err)
	}
}
