package watchcodec

import (
	"bytes"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
)

// MaxFrameBytes bounds one watch event (bytes). An API server's objects
// are far smaller (etcd's default request limit is 1.5 MiB); a longer
// frame ends the watch with an error, and the informer starts a new one.
const MaxFrameBytes = 64 << 20

// valueScanner finds where a JSON value that starts with '{' or '[' ends
// by tracking only strings and nesting (RFC 8259: the structural
// characters of section 2 and the strings of section 7). It does not
// validate; the decoder that reads the value does. It is resumable: scan
// can be called on consecutive pieces of one input.
type valueScanner struct {
	depth  int
	inStr  bool
	escape bool
}

// scan reads b and returns the index just after the value's closing
// bracket, or -1 when b ends first. b[0] of the first piece must be the
// value's opening bracket.
func (s *valueScanner) scan(b []byte) int {
	for i := 0; i < len(b); i++ {
		if s.inStr {
			if s.escape {
				s.escape = false
				continue
			}
			j := bytes.IndexAny(b[i:], "\"\\")
			if j < 0 {
				return -1
			}
			i += j
			if b[i] == '\\' {
				s.escape = true
			} else {
				s.inStr = false
			}
			continue
		}
		switch b[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// framer splits a stream of JSON objects (the watch stream of an API
// server: one metav1.WatchEvent per object, in practice one per line) into
// frames of one object each, with valueScanner. It replaces client-go's
// JSON framer, which parses each event twice to find its end.
type framer struct{}

var jsonFramer runtime.Framer = framer{}

func (framer) NewFrameReader(r io.ReadCloser) io.ReadCloser {
	return &frameReader{r: r, buf: make([]byte, 0, 32<<10)}
}

func (framer) NewFrameWriter(w io.Writer) io.Writer { return w }

type frameReader struct {
	r         io.ReadCloser
	buf       []byte // buf[pos:] is read but not yet returned
	pos       int
	remaining []byte // the rest of a frame longer than the caller's buffer
	err       error  // the error that ended the stream, returned once buf is spent
}

func (f *frameReader) Close() error { return f.r.Close() }

// Read copies the next frame into data. A frame longer than data is
// returned in parts, each but the last with io.ErrShortBuffer, the
// contract of client-go's framed readers (streaming.NewDecoder grows its
// buffer on it). At the end of the stream it returns io.EOF between
// frames and io.ErrUnexpectedEOF inside one.
func (f *frameReader) Read(data []byte) (int, error) {
	if len(f.remaining) > 0 {
		n := copy(data, f.remaining)
		f.remaining = f.remaining[n:]
		if len(f.remaining) > 0 {
			return n, io.ErrShortBuffer
		}
		f.remaining = nil
		return n, nil
	}
	frame, err := f.next()
	if err != nil {
		return 0, err
	}
	n := copy(data, frame)
	if n < len(frame) {
		// frame lives in f.buf, which the next call reuses.
		f.remaining = append([]byte(nil), frame[n:]...)
		return n, io.ErrShortBuffer
	}
	return n, nil
}

// next returns the next object, skipping whitespace before it.
func (f *frameReader) next() ([]byte, error) {
	var s valueScanner
	start, scanned := -1, f.pos // the frame's first byte; how far buf is scanned
	empty := 0                  // reads in a row that returned nothing
	for {
		if start < 0 {
			for scanned < len(f.buf) && isSpace(f.buf[scanned]) {
				scanned++
			}
			if scanned < len(f.buf) {
				if c := f.buf[scanned]; c != '{' {
					return nil, fmt.Errorf("watch stream: want a JSON object, found %q", c)
				}
				start = scanned
			}
		}
		if start >= 0 {
			if end := s.scan(f.buf[scanned:]); end >= 0 {
				f.pos = scanned + end
				return f.buf[start:f.pos], nil
			}
			scanned = len(f.buf)
		}
		if f.err != nil {
			if start < 0 && f.err == io.EOF {
				return nil, io.EOF
			}
			if f.err == io.EOF {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, f.err
		}
		// Keep the frame's bytes read so far (none before it starts) and
		// read more.
		keep := len(f.buf)
		if start >= 0 {
			keep = start
		}
		n := copy(f.buf, f.buf[keep:])
		f.buf, f.pos = f.buf[:n], 0
		scanned -= keep
		if start >= 0 {
			start = 0
		}
		if n > MaxFrameBytes {
			return nil, fmt.Errorf("watch stream: an event is longer than %d bytes", MaxFrameBytes)
		}
		if cap(f.buf)-n < 4096 {
			f.buf = append(f.buf, make([]byte, cap(f.buf))...)[:n]
		}
		m, err := f.r.Read(f.buf[n:cap(f.buf)])
		f.buf = f.buf[:n+m]
		switch {
		case err != nil:
			f.err = err
		case m == 0:
			// As bufio.Reader: a reader that keeps returning nothing is broken.
			if empty++; empty >= 100 {
				f.err = io.ErrNoProgress
			}
		default:
			empty = 0
		}
	}
}
