package view

// Sizes, in bytes, of the Go values an unstructured object is made of on a
// 64-bit platform, used by sizeOf. They count the value's header and the
// interface word that holds it in its parent; map entries add the share of
// a map bucket one entry takes (key and value slots, hash byte, load-factor
// slack).
const (
	ifaceBytes    = 16 // an interface value (type word + data word)
	stringBytes   = 16 // a string header
	sliceBytes    = 24 // a slice header
	mapBytes      = 48 // a map header
	mapEntryBytes = 2*ifaceBytes + 8
	scalarBytes   = 8 // a boxed int64, float64 or bool
)

// sizeOf estimates the heap bytes of a JSON-like value as decoded into an
// unstructured object (map[string]any, []any, string, int64, float64, bool,
// nil): string contents, slice and map headers, map entries and interface
// boxes. It is an estimate, not a measurement: allocator rounding and
// strings shared between objects are not accounted; one walk, no
// allocation. The store uses it to bound the memory its watch history and
// watch queues pin (Options.HistoryBytes, Options.WatchQueueBytes).
func sizeOf(v any) int64 {
	switch x := v.(type) {
	case map[string]any:
		n := int64(ifaceBytes + mapBytes)
		for k, e := range x {
			n += mapEntryBytes + int64(len(k)) + sizeOf(e) - ifaceBytes
		}
		return n
	case []any:
		n := int64(ifaceBytes + sliceBytes)
		for _, e := range x {
			n += sizeOf(e)
		}
		return n
	case string:
		return ifaceBytes + stringBytes + int64(len(x))
	case nil:
		return ifaceBytes
	default:
		return ifaceBytes + scalarBytes
	}
}
