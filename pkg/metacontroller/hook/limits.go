package hook

import (
	"encoding/json"
	"fmt"
)

// Defaults of Limits.
const (
	// DefaultResponseBytes bounds a webhook answer's body: 64 MiB.
	DefaultResponseBytes = 64 << 20
	// DefaultObjects bounds the children, attachments or related-resource
	// rules of one answer: 10000.
	DefaultObjects = 10000
	// DefaultObjectBytes bounds the JSON of one child, attachment,
	// related-resource rule or status: 3 MiB, the largest request body the
	// Kubernetes API server accepts for a write by default (k8s.io/apiserver
	// MaxRequestBodyBytes), so a larger child could not be written anyway.
	DefaultObjectBytes = 3 << 20
	// DefaultValues bounds the JSON values and object keys of one answer:
	// 2^20. Decoding costs memory per value (a map entry, an interface, a
	// boxed number) far more than per byte: one million values decode to
	// about 100 MiB.
	DefaultValues = 1 << 20
	// DefaultDepth bounds the nesting of objects and arrays in an answer
	// (the answer object is depth 1, a child's top level depth 3): 100.
	DefaultDepth = 100
	// maxDepth caps Limits.Depth: encoding/json's own nesting bound.
	maxDepth = 10000
)

// Limits bound what one hook answer may hold once decoded. Every parent of
// every controller is synced in one process, so an answer must not make it
// allocate without bound: a 63 MiB body of empty children ({"children":
// [{},{},...]}) decodes to gigabytes. The body is checked against the
// limits by a scan that allocates nothing before it is decoded; an answer
// over a limit fails the call with ReasonInvalidResponse (no child is
// changed), its message naming the field and the limit. The limits apply
// to webhook and pipeline hooks alike. A field that is not positive takes
// its default.
type Limits struct {
	// ResponseBytes bounds a webhook answer's body (bytes); the rest of a
	// longer body is not read. Default DefaultResponseBytes.
	ResponseBytes int64
	// Objects bounds the elements of each list of objects in an answer:
	// children (CompositeController sync and finalize), attachments
	// (DecoratorController) and relatedResources (customize). Default
	// DefaultObjects.
	Objects int
	// ObjectBytes bounds the JSON text of one element of those lists and of
	// status (bytes). Default DefaultObjectBytes.
	ObjectBytes int64
	// Values bounds the JSON values (objects, arrays, strings, numbers,
	// booleans, nulls) plus object keys of the whole answer. Default
	// DefaultValues.
	Values int
	// Depth bounds the nesting of objects and arrays; the answer object is
	// depth 1. Default DefaultDepth; at most 10000 (the decoder's own
	// bound).
	Depth int
}

// withDefaults returns l with every field that is not positive set to its
// default.
func (l Limits) withDefaults() Limits {
	if l.ResponseBytes <= 0 {
		l.ResponseBytes = DefaultResponseBytes
	}
	if l.Objects <= 0 {
		l.Objects = DefaultObjects
	}
	if l.ObjectBytes <= 0 {
		l.ObjectBytes = DefaultObjectBytes
	}
	if l.Values <= 0 {
		l.Values = DefaultValues
	}
	if l.Depth <= 0 {
		l.Depth = DefaultDepth
	}
	l.Depth = min(l.Depth, maxDepth)
	return l
}

// Check scans data, a hook answer, against l (defaults filled in) without
// decoding it. It returns an error naming the field over a limit, e.g.
// `children: more than 10000 elements (--hook-max-objects)`. A body that is
// not well-formed JSON passes: the decoder then refuses it with its own
// message, and it checks well-formedness before it allocates anything.
func (l Limits) Check(data []byte) error {
	l = l.withDefaults()
	s := &scan{data: data, l: l}
	s.ws()
	if s.pos >= len(data) || data[s.pos] != '{' {
		return nil
	}
	err := s.answer()
	if err == errMalformed {
		return nil
	}
	return err
}

// errMalformed stops a scan of a body that is not JSON.
var errMalformed = fmt.Errorf("malformed JSON")

// objectLists are the answer fields that hold lists of objects, bounded
// by Limits.Objects and, each element, Limits.ObjectBytes.
var objectLists = map[string]bool{"children": true, "attachments": true, "relatedResources": true}

// scan is the state of Limits.Check: a recursive-descent pass over JSON
// text that counts values and measures spans; recursion is bounded by
// Limits.Depth.
type scan struct {
	data   []byte
	pos    int
	l      Limits
	values int
}

func (s *scan) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// count counts one value or key at path's field.
func (s *scan) count() error {
	s.values++
	if s.values > s.l.Values {
		return fmt.Errorf("more than %d JSON values and keys in the answer (--hook-max-values)", s.l.Values)
	}
	return nil
}

// answer scans the top-level object, looking into the fields that hold
// objects.
func (s *scan) answer() error {
	if err := s.count(); err != nil {
		return err
	}
	s.pos++ // '{'
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		s.ws()
		kstart := s.pos
		if err := s.str(); err != nil {
			return err
		}
		key := fieldName(s.data[kstart:s.pos])
		if err := s.count(); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return errMalformed
		}
		s.pos++
		s.ws()
		var err error
		switch {
		case objectLists[key] && s.pos < len(s.data) && s.data[s.pos] == '[':
			err = s.list(key)
		case key == "status":
			start := s.pos
			if err = s.value(2); err == nil && int64(s.pos-start) > s.l.ObjectBytes {
				err = fmt.Errorf("status: %d bytes of JSON, more than %d (--hook-max-object-bytes)", s.pos-start, s.l.ObjectBytes)
			}
		default:
			err = s.value(2)
		}
		if err != nil {
			return err
		}
		if done, err := s.next('}'); done || err != nil {
			return err
		}
	}
}

// list scans the array of objects of the answer field key.
func (s *scan) list(key string) error {
	if err := s.count(); err != nil {
		return err
	}
	if s.l.Depth < 2 {
		return fmt.Errorf("%s: objects and arrays nested more than %d deep (--hook-max-depth)", key, s.l.Depth)
	}
	s.pos++ // '['
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if i >= s.l.Objects {
			return fmt.Errorf("%s: more than %d elements (--hook-max-objects)", key, s.l.Objects)
		}
		s.ws()
		start := s.pos
		if err := s.value(3); err != nil {
			if err == errMalformed {
				return err
			}
			return fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		if n := int64(s.pos - start); n > s.l.ObjectBytes {
			return fmt.Errorf("%s[%d]: %d bytes of JSON, more than %d (--hook-max-object-bytes)", key, i, n, s.l.ObjectBytes)
		}
		if done, err := s.next(']'); done || err != nil {
			return err
		}
	}
}

// next scans the separator after a member or element of an object or
// array closed by closer: done when it is closer, errMalformed when it is
// neither closer nor a comma.
func (s *scan) next(closer byte) (done bool, err error) {
	s.ws()
	if s.pos >= len(s.data) {
		return false, errMalformed
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return false, nil
	case closer:
		s.pos++
		return true, nil
	}
	return false, errMalformed
}

// value scans one value at nesting depth (of the value itself when it is
// an object or array).
func (s *scan) value(depth int) error {
	if s.pos >= len(s.data) {
		return errMalformed
	}
	if err := s.count(); err != nil {
		return err
	}
	switch c := s.data[s.pos]; c {
	case '{', '[':
		if depth > s.l.Depth {
			return fmt.Errorf("objects and arrays nested more than %d deep (--hook-max-depth)", s.l.Depth)
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		s.pos++
		s.ws()
		if s.pos < len(s.data) && s.data[s.pos] == end {
			s.pos++
			return nil
		}
		for {
			s.ws()
			if c == '{' {
				if err := s.str(); err != nil {
					return err
				}
				if err := s.count(); err != nil {
					return err
				}
				s.ws()
				if s.pos >= len(s.data) || s.data[s.pos] != ':' {
					return errMalformed
				}
				s.pos++
				s.ws()
			}
			if err := s.value(depth + 1); err != nil {
				return err
			}
			if done, err := s.next(end); done || err != nil {
				return err
			}
		}
	case '"':
		return s.str()
	default:
		// A number, true, false or null: up to the next delimiter.
		start := s.pos
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case ',', ']', '}', ' ', '\t', '\n', '\r', ':', '"', '{', '[':
				if s.pos == start {
					return errMalformed
				}
				return nil
			}
			s.pos++
		}
		return nil
	}
}

// str scans a string, escapes included.
func (s *scan) str() error {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return errMalformed
	}
	for s.pos++; s.pos < len(s.data); s.pos++ {
		switch s.data[s.pos] {
		case '\\':
			s.pos++
		case '"':
			s.pos++
			return nil
		}
	}
	return errMalformed
}

// fieldName returns the answer field a JSON object key (quoted, as in the
// text) decodes to when it is one the scan looks into (objectLists,
// status), "" otherwise. An escaped key ("childr\u0065n") decodes to the
// same field as the plain one, so escapes are resolved rather than the
// text compared; only keys short enough to name such a field are
// unescaped (the scan allocates for those alone).
func fieldName(quoted []byte) string {
	if len(quoted) > 128 {
		return ""
	}
	raw := quoted[1 : len(quoted)-1]
	for _, c := range raw {
		if c == '\\' {
			var k string
			if json.Unmarshal(quoted, &k) != nil {
				return ""
			}
			raw = []byte(k)
			break
		}
	}
	for _, f := range [...]string{"children", "attachments", "relatedResources", "status"} {
		if string(raw) == f {
			return f
		}
	}
	return ""
}
