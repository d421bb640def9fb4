package view

import "k8s.io/apimachinery/pkg/runtime/schema"

// Counts returns the number of objects of each kind that holds any.
func (s *Store) Counts() map[schema.GroupVersionKind]int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[schema.GroupVersionKind]int, len(s.objects))
	for gvk, objs := range s.objects {
		if len(objs) > 0 {
			out[gvk] = len(objs)
		}
	}
	return out
}
