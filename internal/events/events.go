// Package events formats the notes of Kubernetes Events.
package events

import (
	"fmt"
	"unicode/utf8"
)

// MaxNote is the longest note an Event may carry: the API server refuses
// longer ones (events.k8s.io/v1 validation, 1 kB).
const MaxNote = 1024

// Note formats an Event note and cuts it to MaxNote bytes at a rune
// boundary, ending it with "..." when cut.
func Note(format string, args ...any) string {
	note := fmt.Sprintf(format, args...)
	if len(note) <= MaxNote {
		return note
	}
	cut := MaxNote - len("...")
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + "..."
}
