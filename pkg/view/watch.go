package view

import (
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"
	"weak"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Bookmark is the type of a watch event that carries no change, only a
// resourceVersion the watcher has seen everything up to (a Kubernetes
// BOOKMARK event).
const Bookmark EventType = "BOOKMARK"

// InitialEventsEndAnnotation marks the bookmark that ends the initial events
// of a watch with SendInitialEvents (the Kubernetes "watch list" protocol).
const InitialEventsEndAnnotation = "k8s.io/initial-events-end"

// DefaultWatchQueueLimit bounds the events queued for one watcher that does
// not keep up; past it the watch is closed with 410 Gone (Expired).
const DefaultWatchQueueLimit = 1 << 16

// historyEntry is one committed change. obj is the new state (the last state
// for a deletion, with the deletion's resourceVersion), never modified after
// being recorded; oldLabels the labels of the state before an update, all a
// watcher needs of it to see the object move in or out of its selection.
// old is the state the change replaced (nil for an addition), from which
// SelectPage rebuilds an older snapshot; it is the previous entry's obj
// when the object changed before within the history, so it costs memory
// only for the oldest entry of each object.
// size is sizeOf(obj), at the time of the change. enc is the change's
// Encodings while a watcher holds it.
type historyEntry struct {
	rv        int64
	typ       EventType
	gvk       schema.GroupVersionKind
	obj       *unstructured.Unstructured
	oldLabels map[string]string
	old       *unstructured.Unstructured
	size      int64
	at        time.Time
	enc       weak.Pointer[Encodings]
}

// encodings returns the Encodings the watchers of e share, a new one when
// no watcher holds the last. Called with the store's lock held for writing.
func (e *historyEntry) encodings() *Encodings {
	if enc := e.enc.Value(); enc != nil {
		return enc
	}
	enc := &Encodings{}
	e.enc = weak.Make(enc)
	return enc
}

// history is a ring buffer of the latest changes, bounded by count, bytes
// (the sum of the entries' sizes) and age.
type history struct {
	limit     int
	maxBytes  int64
	maxAge    time.Duration
	buf       []historyEntry
	start     int   // index of the oldest entry
	n         int   // entries in buf
	bytes     int64 // sum of the entries' sizes
	compacted int64 // resourceVersion of the newest dropped entry
}

func (h *history) setBounds(limit int, maxBytes int64, maxAge time.Duration) {
	h.limit, h.maxBytes, h.maxAge = limit, maxBytes, maxAge
}

// add appends e and drops the entries past the bounds, oldest first. An
// entry larger than maxBytes is dropped at once: resuming before it is
// then answered with 410 Gone.
func (h *history) add(e historyEntry) {
	if h.limit <= 0 {
		h.setBounds(DefaultHistoryLimit, DefaultHistoryBytes, DefaultHistoryAge)
	}
	if h.n == len(h.buf) {
		grown := make([]historyEntry, min(max(2*len(h.buf), 64), h.limit+1))
		for i := 0; i < h.n; i++ {
			grown[i] = h.buf[(h.start+i)%len(h.buf)]
		}
		h.buf, h.start = grown, 0
	}
	h.buf[(h.start+h.n)%len(h.buf)] = e
	h.n++
	h.bytes += e.size
	h.trim(e.at)
}

// trim drops the oldest entries while the history is past a bound or they
// are older than maxAge at now.
func (h *history) trim(now time.Time) {
	for h.n > 0 {
		e := &h.buf[h.start]
		if h.n <= h.limit && h.bytes <= h.maxBytes && now.Sub(e.at) <= h.maxAge {
			return
		}
		h.compacted = e.rv
		h.bytes -= e.size
		*e = historyEntry{}
		h.start = (h.start + 1) % len(h.buf)
		h.n--
	}
}

// oldest returns the time of the oldest entry; false when empty.
func (h *history) oldest() (time.Time, bool) {
	if h.n == 0 {
		return time.Time{}, false
	}
	return h.buf[h.start].at, true
}

// since calls f on every entry with a resourceVersion above rv, oldest first.
func (h *history) since(rv int64, f func(*historyEntry)) {
	for i := 0; i < h.n; i++ {
		e := &h.buf[(h.start+i)%len(h.buf)]
		if e.rv > rv {
			f(e)
		}
	}
}

// scheduleExpiry arms the timer that drops the history's entries as they
// age past HistoryAge in a store that sees no more changes (a change trims
// them as well). It fires a 32nd of HistoryAge late at most, so that one
// firing drops a batch of entries rather than each on its own timer; a
// Watch trims before it checks the requested version, so the late entries
// are never served. Called with s.mu held for writing.
func (s *Store) scheduleExpiry() {
	if s.expiry != nil {
		return
	}
	at, ok := s.history.oldest()
	if !ok {
		return
	}
	d := time.Until(at.Add(s.history.maxAge)) + s.history.maxAge/32
	s.expiry = time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.expiry = nil
		s.history.trim(time.Now())
		s.scheduleExpiry()
	})
}

// Close stops the timer that trims the history by age, which otherwise
// keeps the store reachable until it fires (HistoryAge after a change):
// call it on a store that is dropped. The store stays usable; a later
// change arms the timer again.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.expiry != nil {
		s.expiry.Stop()
		s.expiry = nil
	}
}

// Closed reports whether the history's expiry timer is stopped: the store
// was closed and has not changed since (or never changed).
func (s *Store) Closed() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.expiry == nil
}

// resetExpiry re-arms the expiry timer after the bounds changed. Called
// with s.mu held for writing.
func (s *Store) resetExpiry() {
	if s.expiry != nil {
		s.expiry.Stop()
		s.expiry = nil
	}
	s.scheduleExpiry()
}

// record appends a committed change to the history and queues it for the
// watchers of its kind, in resourceVersion order. Called with s.mu held for
// writing, after s.rv was incremented for the change. old is the state
// the change replaced: before an update, the last state of a deletion, nil
// for an addition.
func (s *Store) record(typ EventType, gvk schema.GroupVersionKind, obj, old *unstructured.Unstructured) {
	if typ == Deleted {
		// As in Kubernetes, a deletion event carries the deletion's version:
		// a copy of the last state with a new metadata map, sharing the rest
		// (stored objects are never modified in place).
		last := &unstructured.Unstructured{Object: maps.Clone(obj.Object)}
		if md, ok := obj.Object["metadata"].(map[string]any); ok {
			last.Object["metadata"] = maps.Clone(md)
		}
		last.SetResourceVersion(strconv.FormatInt(s.rv, 10))
		obj = last
	}
	e := historyEntry{rv: s.rv, typ: typ, gvk: gvk, obj: obj, size: sizeOf(obj.Object), at: time.Now()}
	if typ == Modified && old != nil {
		e.oldLabels = old.GetLabels()
	}
	if typ != Added {
		e.old = old
	}
	var enc *Encodings
	if len(s.watchers[gvk]) > 0 {
		enc = &Encodings{}
		e.enc = weak.Make(enc)
	}
	s.history.add(e)
	s.scheduleExpiry()
	for w := range s.watchers[gvk] {
		w.push(e, enc)
	}
}

// WatchEvent is one event of a Watcher. Object must not be modified: it is
// shared with the store's history and other watchers. For Bookmark, Object
// holds only apiVersion, kind and metadata.resourceVersion (and, ending the
// initial events, the InitialEventsEndAnnotation).
type WatchEvent struct {
	Type   EventType
	Object *unstructured.Unstructured
	// Encodings caches the serialized forms of Object, shared by every
	// watcher the change is sent to (whatever Type each one sees it as);
	// nil for the initial events and bookmarks.
	Encodings *Encodings
	// Size is what the event counts against WatchOptions.QueueBytes, in
	// bytes: the estimated size of Object (see sizeOf) for a change, 0 for
	// the initial events and bookmarks.
	Size int64
}

// WatchOptions configure Watch, following the Kubernetes watch semantics
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#semantics-for-watch).
type WatchOptions struct {
	ListOptions
	// ResourceVersion is where the watch starts. "" or "0": with an ADDED
	// event for every selected object, then every change. A version N: every
	// change after N; 410 Gone (Expired) when changes after N were dropped
	// from the history or N is newer than the store (a restarted server).
	ResourceVersion string
	// SendInitialEvents overrides whether the watch starts with an ADDED
	// event for every selected object (default: only when ResourceVersion is
	// "" or "0"). With it true and InitialEventsBookmark, the initial events
	// end with a Bookmark annotated with InitialEventsEndAnnotation.
	SendInitialEvents     *bool
	InitialEventsBookmark bool
	// BookmarkInterval, when positive, makes the watcher send a Bookmark
	// with the store's resourceVersion when it has nothing else to send for
	// that long.
	BookmarkInterval time.Duration
	// QueueLimit bounds the events queued for a slow consumer
	// (DefaultWatchQueueLimit when 0); past it the watch closes.
	QueueLimit int
	// QueueBytes bounds the bytes a slow consumer holds (the store's
	// Options.WatchQueueBytes when 0): each change counts its Size from the
	// change until it is handed over, or with HoldUntilRelease until the
	// consumer releases it. A change that would take a non-zero count past
	// it closes the watch, and Err then returns 410 Gone (Expired). The
	// initial ADDED events are the live objects and are not counted.
	QueueBytes int64
	// HoldUntilRelease keeps a delivered event counted against QueueBytes
	// until the consumer calls Release with its Size, i.e. until it has
	// written the event to its client rather than merely received it.
	HoldUntilRelease bool
}

// Watcher delivers the changes of one kind. Stop it when done.
type Watcher struct {
	store *Store
	gvk   schema.GroupVersionKind
	opts  WatchOptions

	mu       sync.Mutex
	queue    []WatchEvent
	bytes    int64 // sum of the sizes of the events queued, in delivery or held
	overflow error // why the watcher fell behind; nil while it keeps up
	expired  chan struct{}
	signal   chan struct{}

	out      chan WatchEvent
	done     chan struct{}
	stopOnce sync.Once
}

// Watch starts a watch of a kind. Errors: 410 Gone (Expired) when
// opts.ResourceVersion is too old or too new, BadRequest when it is not a
// number.
func (s *Store) Watch(gvk schema.GroupVersionKind, opts WatchOptions) (*Watcher, error) {
	var from int64
	if opts.ResourceVersion != "" {
		v, err := strconv.ParseInt(opts.ResourceVersion, 10, 64)
		if err != nil || v < 0 {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: not a non-negative integer", opts.ResourceVersion))
		}
		from = v
	}
	initial := from == 0
	if opts.SendInitialEvents != nil {
		initial = *opts.SendInitialEvents
	}
	if opts.QueueLimit <= 0 {
		opts.QueueLimit = DefaultWatchQueueLimit
	}
	w := &Watcher{store: s, gvk: gvk, opts: opts, signal: make(chan struct{}, 1),
		out: make(chan WatchEvent), done: make(chan struct{}), expired: make(chan struct{})}

	s.mu.Lock()
	if from > s.rv {
		s.mu.Unlock()
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too large resource version: %d, current: %d (the store was probably restarted; list again)", from, s.rv))
	}
	s.history.trim(time.Now())
	if w.opts.QueueBytes <= 0 {
		w.opts.QueueBytes = s.opts.WatchQueueBytes
	}
	if from > 0 && from < s.history.compacted {
		s.mu.Unlock()
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.history.compacted))
	}
	if initial {
		var objs []*unstructured.Unstructured
		for _, obj := range s.objects[gvk] {
			if opts.Matches(obj) {
				objs = append(objs, obj)
			}
		}
		sortObjects(objs)
		for _, obj := range objs {
			w.queue = append(w.queue, WatchEvent{Type: Added, Object: obj})
		}
		if opts.InitialEventsBookmark {
			w.queue = append(w.queue, WatchEvent{Type: Bookmark, Object: w.bookmark(s.rv, true)})
		}
	}
	if from > 0 && !initial {
		s.history.since(from, func(e *historyEntry) {
			if e.gvk == gvk {
				w.pushLocked(*e, e.encodings)
			}
		})
	}
	if s.watchers[gvk] == nil {
		s.watchers[gvk] = map[*Watcher]struct{}{}
	}
	s.watchers[gvk][w] = struct{}{}
	pending := len(w.queue) > 0 // read before a change may push to it
	s.mu.Unlock()
	if pending {
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
	go w.run()
	return w, nil
}

// ResultChan returns the events; it is closed when the watcher stops or
// falls too far behind (then Err says so).
func (w *Watcher) ResultChan() <-chan WatchEvent { return w.out }

// Expired returns a channel closed when the watcher falls too far behind
// (past WatchOptions.QueueLimit or QueueBytes): the queued events are
// dropped and ResultChan closes without delivering them.
func (w *Watcher) Expired() <-chan struct{} { return w.expired }

// Err returns nil while the watcher keeps up, and a 410 Gone (Expired) API
// error naming the bound it passed once it fell too far behind: its client
// must list again, as after a slow watcher of the Kubernetes watch cache is
// closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overflow
}

// Hold counts n more bytes against WatchOptions.QueueBytes, such as the
// encoded form of an event the consumer is writing, until Release(n).
func (w *Watcher) Hold(n int64) {
	w.mu.Lock()
	if w.overflow == nil {
		w.bytes += n
	}
	w.mu.Unlock()
}

// Release ends the count of n bytes: an event's Size with
// WatchOptions.HoldUntilRelease once it is written, or bytes of Hold.
func (w *Watcher) Release(n int64) {
	w.mu.Lock()
	if w.overflow == nil {
		w.bytes = max(w.bytes-n, 0)
	}
	w.mu.Unlock()
}

// Stop ends the watch and releases its resources. It is safe to call more
// than once and concurrently with event delivery.
func (w *Watcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		w.store.mu.Lock()
		delete(w.store.watchers[w.gvk], w)
		if len(w.store.watchers[w.gvk]) == 0 {
			delete(w.store.watchers, w.gvk)
		}
		w.store.mu.Unlock()
	})
}

func (w *Watcher) bookmark(rv int64, initialEnd bool) *unstructured.Unstructured {
	b := &unstructured.Unstructured{}
	b.SetGroupVersionKind(w.gvk)
	b.SetResourceVersion(strconv.FormatInt(rv, 10))
	if initialEnd {
		b.SetAnnotations(map[string]string{InitialEventsEndAnnotation: "true"})
	}
	return b
}

// translate turns a change into the event this watcher sees: a change
// that moves an object into the selection is ADDED, out of it DELETED.
// The event carries enc, the change's shared Encodings, and its size.
func (w *Watcher) translate(e historyEntry, enc *Encodings) (WatchEvent, bool) {
	ev := WatchEvent{Object: e.obj, Encodings: enc, Size: e.size}
	now := w.opts.Matches(e.obj)
	if e.typ == Modified {
		// Two versions of an object differ in the selection only by labels.
		before := w.opts.matches(e.obj, e.oldLabels)
		switch {
		case now && before:
			ev.Type = Modified
		case now:
			ev.Type = Added
		case before:
			ev.Type = Deleted
		default:
			return WatchEvent{}, false
		}
		return ev, true
	}
	if e.typ == Added {
		ev.Type = Added
	} else {
		ev.Type = Deleted
	}
	return ev, now
}

// push queues a change; called with the store's lock held. A change past
// the watcher's bounds drops its queue and expires it.
func (w *Watcher) push(e historyEntry, enc *Encodings) {
	ev, ok := w.translate(e, enc)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.overflow == nil {
		var err error
		switch {
		case len(w.queue) >= w.opts.QueueLimit:
			err = apierrors.NewResourceExpired(fmt.Sprintf("the watch fell behind by %d events, the most a watch may have unread; list again", len(w.queue)))
		case w.bytes > 0 && w.bytes+ev.Size > w.opts.QueueBytes:
			err = apierrors.NewResourceExpired(fmt.Sprintf("the watch fell behind by %d bytes of changes with %d more to send, past the %d bytes a watch may hold unread (--watch-queue-bytes); list again",
				w.bytes, ev.Size, w.opts.QueueBytes))
		}
		if err != nil {
			w.overflow, w.queue, w.bytes = err, nil, 0
			close(w.expired)
		} else {
			w.queue = append(w.queue, ev)
			w.bytes += ev.Size
		}
	}
	w.mu.Unlock()
	select {
	case w.signal <- struct{}{}:
	default:
	}
}

// pushLocked queues a change from the history while Watch holds the store
// lock and the watcher is not yet running.
func (w *Watcher) pushLocked(e historyEntry, enc func() *Encodings) {
	if ev, ok := w.translate(e, nil); ok {
		ev.Encodings = enc()
		w.queue = append(w.queue, ev)
		w.bytes += ev.Size
	}
}

func (w *Watcher) run() {
	defer close(w.out)
	var tick <-chan time.Time
	if w.opts.BookmarkInterval > 0 {
		t := time.NewTicker(w.opts.BookmarkInterval)
		defer t.Stop()
		tick = t.C
	}
	sentSince := false
	for {
		select {
		case <-w.done:
			return
		case <-w.signal:
			sent, ok := w.drain()
			sentSince = sentSince || sent
			if !ok {
				return
			}
		case <-tick:
			if sentSince {
				sentSince = false
				continue
			}
			// Everything committed up to the store's version has been
			// queued (pushes happen under the store lock); with an empty
			// queue it has all been sent, so that version is safe to resume
			// from.
			w.store.mu.RLock()
			w.mu.Lock()
			empty := len(w.queue) == 0 && w.overflow == nil
			rv := w.store.rv
			w.mu.Unlock()
			w.store.mu.RUnlock()
			if !empty {
				continue
			}
			select {
			case w.out <- WatchEvent{Type: Bookmark, Object: w.bookmark(rv, false)}:
			case <-w.done:
				return
			}
		}
	}
}

// drain delivers the queued events one at a time, so that an overflow
// while the consumer is slow drops the rest of the queue at once. It
// reports whether it delivered any, and false for ok when the watcher
// stopped or fell behind.
func (w *Watcher) drain() (sent, ok bool) {
	for {
		w.mu.Lock()
		if w.overflow != nil {
			w.mu.Unlock()
			w.Stop()
			return sent, false
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return sent, true
		}
		ev := w.queue[0]
		w.mu.Unlock()
		select {
		case w.out <- ev:
			sent = true
			w.mu.Lock()
			if w.overflow == nil {
				w.queue[0] = WatchEvent{} // delivered: not pinned by the queue
				w.queue = w.queue[1:]
				if !w.opts.HoldUntilRelease {
					w.bytes -= ev.Size
				}
			}
			w.mu.Unlock()
		case <-w.signal:
			// More events, or an overflow: look again.
		case <-w.done:
			return sent, false
		}
	}
}

// Watchers returns the number of running watchers of a kind.
func (s *Store) Watchers(gvk schema.GroupVersionKind) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.watchers[gvk])
}
