package events

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNote(t *testing.T) {
	if got := Note("controller %s: %d", "c", 3); got != "controller c: 3" {
		t.Errorf("short note: %q", got)
	}
	long := Note("%s", strings.Repeat("é", 1000)) // 2000 bytes
	if len(long) > MaxNote || !strings.HasSuffix(long, "...") || !utf8.ValidString(long) {
		t.Errorf("long note: %d bytes, valid UTF-8 %v, suffix %q", len(long), utf8.ValidString(long), long[len(long)-5:])
	}
	exact := strings.Repeat("a", MaxNote)
	if Note("%s", exact) != exact {
		t.Error("a note of exactly MaxNote bytes was cut")
	}
}
