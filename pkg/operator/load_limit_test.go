package operator

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestDecodeObjectsLimit: a stream longer than MaxDecodeBytes is an error,
// not a shorter list of objects, and reading stops there (a stream that
// never ends, as /dev/zero, takes bounded memory).
func TestDecodeObjectsLimit(t *testing.T) {
	defer func(n int64) { MaxDecodeBytes = n }(MaxDecodeBytes)
	MaxDecodeBytes = 1 << 10
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n---\n"
	small := strings.Repeat(doc, 5)
	if objs, err := DecodeObjects(strings.NewReader(small)); err != nil || len(objs) != 5 {
		t.Fatalf("%d bytes: %d objects, %v", len(small), len(objs), err)
	}
	if _, err := DecodeObjects(strings.NewReader(strings.Repeat(doc, 100))); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a long stream: %v, want ErrTooLarge", err)
	}
	if _, err := DecodeObjects(io.LimitReader(zeros{}, 1<<30)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("zeros: %v, want ErrTooLarge", err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
