package hello

import (
	"context"
	"errors"
	"testing"
)

func TestSayHello(t *testing.T) {
	got, err := New().SayHello(context.Background(), "wirelens")
	if err != nil {
		t.Fatal(err)
	}
	if want := "Hello, wirelens"; got != want {
		t.Fatalf("SayHello = %q, want %q", got, want)
	}
}

func TestSayHelloBig(t *testing.T) {
	got, err := New().SayHelloBig(context.Background(), "wirelens")
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != "Hello, wirelens" {
		t.Fatalf("message = %q", got.Message)
	}
	if len(got.DataList) != BigItems {
		t.Fatalf("len(DataList) = %d, want %d", len(got.DataList), BigItems)
	}
	if got.DataList[0] != "Item 0" || got.DataList[999] != "Item 999" {
		t.Fatalf("DataList ends = %q .. %q", got.DataList[0], got.DataList[999])
	}
}

func TestCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().SayHello(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("SayHello err = %v, want context.Canceled", err)
	}
	if _, err := New().SayHelloBig(ctx, "x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("SayHelloBig err = %v, want context.Canceled", err)
	}
}
