package view

import (
	"bytes"
	"io"
	"sync"
)

// MaxEncodings bounds the serialized forms an Encodings keeps: a form past
// it is encoded for its caller alone, as if there were no cache.
const MaxEncodings = 16

// Encodings caches the serialized forms of one committed object version,
// shared by every watcher the change is sent to, so that the change is
// encoded once per form (media type, version, transformation) however many
// clients watch it, as the Kubernetes watch cache does with its caching
// objects. A form is kept as long as the Encodings is reachable: the
// watchers that queued the change hold it, and the store's history only
// keeps a weak reference (so a client resuming from the history shares it
// while it lives). The cached bytes are immutable. Safe for concurrent use.
type Encodings struct {
	mu    sync.Mutex
	forms map[string]*encodedForm
}

// encodedForm is one serialized form; once guards its single encoding.
type encodedForm struct {
	once sync.Once
	raw  []byte
	err  error
}

// Encode returns the form named id (an encoder's identifier: the same id
// must always produce the same bytes), calling encode to produce it the
// first time only; concurrent callers of the same id wait for that one
// encoding. An error of encode is returned to every caller of that id.
// The returned slice is shared and must not be modified.
func (c *Encodings) Encode(id string, encode func(io.Writer) error) ([]byte, error) {
	c.mu.Lock()
	f, ok := c.forms[id]
	if !ok {
		if len(c.forms) >= MaxEncodings {
			c.mu.Unlock()
			var buf bytes.Buffer
			err := encode(&buf)
			return buf.Bytes(), err
		}
		if c.forms == nil {
			c.forms = map[string]*encodedForm{}
		}
		f = &encodedForm{}
		c.forms[id] = f
	}
	c.mu.Unlock()
	f.once.Do(func() {
		var buf bytes.Buffer
		f.err = encode(&buf)
		f.raw = buf.Bytes()
	})
	return f.raw, f.err
}
