package controller

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
)

// outputDigest is the first 8 bytes of the SHA-256 of doc's JSON
// encoding by encoding/json (map keys sorted, so equal documents have
// equal digests; the digest of a document encoding/json cannot encode is
// that of no bytes). The digest is recorded on written objects
// (ManagedMetadataAnnotation), so the bytes hashed must stay those of
// json.Marshal: digestWriter builds them in a reused buffer, and hands what
// it has no fast path for to json.Marshal.
func outputDigest(doc map[string]any) uint64 {
	d := digestWriters.Get().(*digestWriter)
	d.value(doc)
	if d.failed {
		d.buf = d.buf[:0]
	}
	sum := sha256.Sum256(d.buf)
	d.buf, d.failed = d.buf[:0], false
	if cap(d.buf) <= maxPooledDigestBuffer {
		digestWriters.Put(d)
	}
	return binary.BigEndian.Uint64(sum[:8])
}

// digestHex renders a digest of outputDigest as it is recorded: 16
// lower-case hex digits.
func digestHex(d uint64) string {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], d)
	return hex.EncodeToString(b[:])
}

// digestWriters holds digestWriters for reuse, so that their buffers are
// not allocated again for every digest.
var digestWriters = sync.Pool{New: func() any {
	return &digestWriter{buf: make([]byte, 0, 1024), keys: make([]string, 0, 32)}
}}

// maxPooledDigestBuffer is the largest buffer (bytes) kept for reuse: one
// large output does not pin its encoding's size.
const maxPooledDigestBuffer = 64 << 10

// digestWriter appends the json.Marshal encoding of a JSON-model value to
// buf.
type digestWriter struct {
	buf    []byte
	keys   []string // reused for sorting map keys
	failed bool     // json.Marshal would have failed
}

func (d *digestWriter) byte(b byte) { d.buf = append(d.buf, b) }

func (d *digestWriter) value(v any) {
	if d.failed {
		return
	}
	switch x := v.(type) {
	case nil:
		d.buf = append(d.buf, "null"...)
	case string:
		d.string(x)
	case bool:
		d.buf = strconv.AppendBool(d.buf, x)
	case int64:
		d.buf = strconv.AppendInt(d.buf, x, 10)
	case map[string]any:
		if x == nil {
			d.buf = append(d.buf, "null"...)
			return
		}
		start := len(d.keys)
		for k := range x {
			d.keys = append(d.keys, k)
		}
		keys := d.keys[start:]
		slices.Sort(keys)
		d.byte('{')
		for i, k := range keys {
			if i > 0 {
				d.byte(',')
			}
			d.string(k)
			d.byte(':')
			d.value(x[k])
		}
		d.byte('}')
		clear(keys)
		d.keys = d.keys[:start]
	case []any:
		if x == nil {
			d.buf = append(d.buf, "null"...)
			return
		}
		d.byte('[')
		for i, e := range x {
			if i > 0 {
				d.byte(',')
			}
			d.value(e)
		}
		d.byte(']')
	default:
		d.marshal(v)
	}
}

// string writes a JSON string as encoding/json does (HTML characters
// escaped); strings that need any escape go through json.Marshal.
func (d *digestWriter) string(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			d.marshal(s)
			return
		}
	}
	d.buf = append(d.buf, '"')
	d.buf = append(d.buf, s...)
	d.buf = append(d.buf, '"')
}

func (d *digestWriter) marshal(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		d.failed = true
		return
	}
	d.buf = append(d.buf, b...)
}
