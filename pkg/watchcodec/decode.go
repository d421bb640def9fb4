package watchcodec

import (
	"hash/maphash"
	"strconv"
	"sync"
	"sync/atomic"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth is the deepest nesting of objects and arrays decodeJSON
// accepts, that of encoding/json (and sigs.k8s.io/json): deeper input is
// an error, handed to client-go's decoder, which reports it.
const maxDepth = 10000

// decodeJSON parses data, one JSON value (RFC 8259) with optional
// surrounding whitespace, into the values sigs.k8s.io/json's
// UnmarshalCaseSensitivePreserveInts makes of it into an `any`:
// map[string]any, []any, string, bool, nil, int64 for an integer that
// fits, float64 for any other number; invalid UTF-8 and lone surrogates
// in strings become U+FFFD; of repeated keys the last wins. It reports
// false for anything that decoder rejects (syntax, depth over maxDepth, a
// number out of float64's range), and may report false for more: the
// caller then hands the input to client-go's decoder, which decides.
//
// What it makes differently costs less memory: maps and slices are
// allocated at their final size (no growth slack), and object keys are
// shared between objects through a bounded table (internKey), so the
// thousands of cached objects of a kind hold one copy of "metadata",
// "containerPort" or "app.kubernetes.io/name" instead of one each.
func decodeJSON(data []byte) (any, bool) {
	return decodeJSONWith(data, false)
}

// decodeJSONWith is decodeJSON; with dropManagedFields, the
// metadata.managedFields of a top-level object is checked as JSON but not
// built: the value decoded has no such field (the cache of a manager that
// never reads it keeps none, and it is most of what decoding an object
// allocated).
func decodeJSONWith(data []byte, dropManagedFields bool) (any, bool) {
	s := scratchPool.Get().(*scratch)
	d := decoder{data: data, dropManagedFields: dropManagedFields, scratch: *s}
	d.skipSpace()
	v, ok := d.value(0)
	if ok {
		d.skipSpace()
		ok = d.pos == len(d.data)
	}
	*s = d.scratch
	s.put()
	if !ok {
		return nil, false
	}
	return v, true
}

// scratch is a decoder's scratch stacks, kept between decodings: they
// grow to the widest nesting of a kind's objects once instead of at each
// event (a fifth of what decoding a pod allocated,
// BenchmarkWatchDecode).
type scratch struct {
	keys []string
	vals []any
	buf  []byte
}

// maxScratch is the most entries (or string bytes) a scratch keeps for
// the next decoding: one huge object does not pin its stacks.
const maxScratch = 4096

var scratchPool = sync.Pool{New: func() any { return &scratch{} }}

// put returns the stacks to the pool, emptied of references (what a
// decoding left above its final length, e.g. after an error, too).
func (s *scratch) put() {
	if cap(s.keys) > maxScratch || cap(s.vals) > maxScratch || cap(s.buf) > maxScratch {
		return
	}
	clear(s.keys[:cap(s.keys)])
	clear(s.vals[:cap(s.vals)])
	s.keys, s.vals, s.buf = s.keys[:0], s.vals[:0], s.buf[:0]
	scratchPool.Put(s)
}

type decoder struct {
	data []byte
	pos  int
	// Scratch stacks for the entries of the objects and arrays being
	// decoded, shared by the nesting levels (each level uses the part
	// above where its parent stopped), so that a value is built once at
	// its final size; and a buffer for strings with escapes.
	scratch

	dropManagedFields bool
	// inMetadata is set while the value of the top-level object's
	// "metadata" is decoded; discard while a value is checked but not
	// built (see decodeJSONWith).
	inMetadata, discard bool
}

func (d *decoder) skipSpace() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) value(depth int) (any, bool) {
	if d.pos >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.strValue()
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

// skip checks the value at d.pos as value does, without building it.
func (d *decoder) skip(depth int) bool {
	was := d.discard
	d.discard = true
	_, ok := d.value(depth)
	d.discard = was
	return ok
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.pos < len(word) || string(d.data[d.pos:d.pos+len(word)]) != word {
		return false
	}
	d.pos += len(word)
	return true
}

func (d *decoder) object(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // {
	base := len(d.keys)
	defer func() { d.keys, d.vals = d.keys[:base], d.vals[:base] }()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return map[string]any{}, true
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return nil, false
		}
		k, ok := d.str(true)
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return nil, false
		}
		d.pos++
		d.skipSpace()
		var v any
		keep := !d.discard
		switch {
		case d.discard:
			ok = d.skip(depth)
		case d.dropManagedFields && depth == 2 && d.inMetadata && k == "managedFields":
			ok, keep = d.skip(depth), false
		case d.dropManagedFields && depth == 1 && k == "metadata":
			d.inMetadata = true
			v, ok = d.value(depth)
			d.inMetadata = false
		default:
			v, ok = d.value(depth)
		}
		if !ok {
			return nil, false
		}
		if keep {
			d.keys = append(d.keys, k)
			d.vals = append(d.vals, v)
		}
		more, ok := d.separator('}')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	if d.discard {
		return nil, true
	}
	m := make(map[string]any, len(d.keys)-base)
	for i := base; i < len(d.keys); i++ {
		m[d.keys[i]] = d.vals[i]
		d.vals[i] = nil
	}
	return m, true
}

// separator reads what follows an entry of an object or array: a comma
// (more entries follow) or end, the closing bracket; false for anything
// else.
func (d *decoder) separator(end byte) (more, ok bool) {
	d.skipSpace()
	if d.pos >= len(d.data) {
		return false, false
	}
	switch d.data[d.pos] {
	case ',':
		d.pos++
		d.skipSpace()
		return true, true
	case end:
		d.pos++
		return false, true
	}
	return false, false
}

func (d *decoder) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // [
	base := len(d.vals)
	defer func() { d.keys, d.vals = d.keys[:min(base, len(d.keys))], d.vals[:base] }()
	d.skipSpace()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return []any{}, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		if !d.discard {
			// keys stays level with vals, so that an object inside
			// the array starts its entries above this array's.
			d.keys = append(d.keys, "")
			d.vals = append(d.vals, v)
		}
		more, ok := d.separator(']')
		if !ok {
			return nil, false
		}
		if !more {
			break
		}
	}
	if d.discard {
		return nil, true
	}
	out := make([]any, len(d.vals)-base)
	copy(out, d.vals[base:])
	clear(d.vals[base:])
	return out, true
}

// strValue reads a string value at d.pos (the opening quote): one of
// printable ASCII without escapes, the common case, through internValue.
func (d *decoder) strValue() (any, bool) {
	start := d.pos + 1
	for i := start; i < len(d.data); i++ {
		c := d.data[i]
		if c == '"' {
			d.pos = i + 1
			if d.discard {
				return nil, true
			}
			return internValue(d.data[start:i]), true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
	}
	s, ok := d.str(false)
	if !ok || d.discard {
		return nil, ok
	}
	return s, true
}

// str reads a string at d.pos (the opening quote); key selects interning.
func (d *decoder) str(key bool) (string, bool) {
	d.pos++ // "
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			raw := d.data[start:d.pos]
			d.pos++
			if d.discard {
				return "", true
			}
			if key {
				return internKey(raw), true
			}
			return string(raw), true
		case c == '\\':
			return d.escaped(start, key)
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			if r == utf8.RuneError && size == 1 {
				// Invalid UTF-8: the slow path replaces it with U+FFFD.
				return d.escaped(start, key)
			}
			d.pos += size
		}
	}
	return "", false
}

// escaped reads the rest of a string that has escapes or invalid UTF-8,
// from start (just after the opening quote), as encoding/json does.
func (d *decoder) escaped(start int, key bool) (string, bool) {
	b := append(d.buf[:0], d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			d.buf = b
			if d.discard {
				return "", true
			}
			if key {
				return internKey(b), true
			}
			return string(b), true
		case c == '\\':
			if d.pos+1 >= len(d.data) {
				return "", false
			}
			e := d.data[d.pos+1]
			d.pos += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := d.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					r2 := utf8.RuneError
					if d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
						save := d.pos
						d.pos += 2
						if x, ok := d.hex4(); ok {
							if dec := utf16.DecodeRune(r, x); dec != utf8.RuneError {
								r2 = dec
							} else {
								d.pos = save
							}
						} else {
							return "", false
						}
					}
					r = r2
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			d.pos++
		default:
			r, size := utf8.DecodeRune(d.data[d.pos:])
			d.pos += size
			b = utf8.AppendRune(b, r)
		}
	}
	return "", false
}

func (d *decoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	d.pos += 4
	return r, true
}

// number reads a number (RFC 8259 grammar) as int64 when it is an integer
// literal that fits, else as float64; false when it is out of float64's
// range, as sigs.k8s.io/json's decoder fails then.
func (d *decoder) number() (any, bool) {
	start := d.pos
	isInt := true
	if d.data[d.pos] == '-' {
		d.pos++
	}
	switch {
	case d.pos < len(d.data) && d.data[d.pos] == '0':
		d.pos++
	case d.pos < len(d.data) && d.data[d.pos] >= '1' && d.data[d.pos] <= '9':
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
	default:
		return nil, false
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		isInt = false
		d.pos++
		if !d.digits() {
			return nil, false
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		isInt = false
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if !d.digits() {
			return nil, false
		}
	}
	s := d.data[start:d.pos]
	if isInt {
		if i, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return i, true
		}
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

func (d *decoder) digits() bool {
	n := d.pos
	for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
		d.pos++
	}
	return d.pos > n
}

// The value table: a direct-mapped cache of valueSlots recent string
// values of up to maxInternedValue bytes, each with the interface value
// that holds it, so that a value repeated across objects ("Running",
// "TCP", an image, a namespace, a label value) is one string and one
// interface box for all of them. A value whose slot holds another replaces
// it: values seen once (names, uids, addresses) pass through without
// growing the table, values seen often stay. Bounded memory (valueSlots
// entries), no lock.
const (
	valueSlots       = 1 << 12
	maxInternedValue = 64
)

type valueEntry struct {
	s string
	v any
}

var (
	valueTable [valueSlots]atomic.Pointer[valueEntry]
	valueSeed  = maphash.MakeSeed()
)

// internValue returns b as a string in an interface, the table's when it
// holds b.
func internValue(b []byte) any {
	if len(b) > maxInternedValue {
		return string(b)
	}
	slot := &valueTable[maphash.Bytes(valueSeed, b)&(valueSlots-1)]
	if e := slot.Load(); e != nil && e.s == string(b) {
		return e.v
	}
	return takeValue(slot, string(b))
}

// internString is internValue for a string (coerced to valid UTF-8 first).
func internString(s string) any {
	if !utf8.ValidString(s) {
		s = coerceUTF8(s)
	}
	if len(s) > maxInternedValue {
		return s
	}
	slot := &valueTable[maphash.String(valueSeed, s)&(valueSlots-1)]
	if e := slot.Load(); e != nil && e.s == s {
		return e.v
	}
	return takeValue(slot, s)
}

// takeValue puts s in slot, in place of what it held, and returns its
// interface box.
func takeValue(slot *atomic.Pointer[valueEntry], s string) any {
	e := &valueEntry{s: s, v: s}
	slot.Store(e)
	return e.v
}

// Bounds of the key table: keys up to maxInternedKey bytes are shared,
// until the table holds maxInternedKeys of them (about 1.5 MB at most);
// later new keys are allocated per object, as before the table.
const (
	maxInternedKey  = 64
	maxInternedKeys = 1 << 14
)

var keyTable = struct {
	sync.RWMutex
	m map[string]string
}{m: map[string]string{}}

// internKey returns b as a string, the table's copy when it has one or
// takes it in. The lookup allocates nothing (the compiler does not copy
// b for a map index with string(b)).
func internKey(b []byte) string {
	if len(b) > maxInternedKey {
		return string(b)
	}
	keyTable.RLock()
	s, ok := keyTable.m[string(b)]
	keyTable.RUnlock()
	if ok {
		return s
	}
	return takeKey(string(b))
}

// internKeyString is internKey for a string: the table's copy of s, or s,
// taken in while the table has room.
func internKeyString(s string) string {
	if len(s) > maxInternedKey {
		return s
	}
	keyTable.RLock()
	k, ok := keyTable.m[s]
	keyTable.RUnlock()
	if ok {
		return k
	}
	return takeKey(s)
}

// takeKey returns the table's copy of s (another goroutine may have taken
// it in since the caller looked), else s, taken in while the table has
// room.
func takeKey(s string) string {
	keyTable.Lock()
	defer keyTable.Unlock()
	if k, ok := keyTable.m[s]; ok {
		return k
	}
	if len(keyTable.m) < maxInternedKeys {
		keyTable.m[s] = s
	}
	return s
}
