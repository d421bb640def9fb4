package view

import "testing"

// TestCloseStopsExpiry: a change arms the timer that trims the history by
// age, which keeps the store reachable until it fires; Close stops it, and
// the store stays usable (a later change arms it again).
func TestCloseStopsExpiry(t *testing.T) {
	s := NewStore()
	if _, err := s.Create(pod("a", nil)); err != nil {
		t.Fatal(err)
	}
	armed := func() bool {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.expiry != nil
	}
	if !armed() {
		t.Fatal("no expiry timer after a change")
	}
	s.Close()
	if armed() {
		t.Fatal("the expiry timer is still armed after Close")
	}
	if _, err := s.Create(pod("b", nil)); err != nil {
		t.Fatal(err)
	}
	if !armed() {
		t.Fatal("no expiry timer after a change following Close")
	}
	s.Close()
}
