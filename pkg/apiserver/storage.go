package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	apistorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/apiserver/pkg/util/dryrun"

	"github.com/dcontroller/dcontroller/pkg/object"
	"github.com/dcontroller/dcontroller/pkg/view"
)

// maxUpdateRetries bounds how often a patch is re-applied when a concurrent
// write changed the object between reading and writing it.
const maxUpdateRetries = 16

// storage is the REST storage of one served kind, backed by the view store.
// It implements the k8s.io/apiserver rest interfaces the generic handlers
// call: Getter, Lister, Watcher, Creater, Updater (and so Patcher),
// GracefulDeleter, CollectionDeleter and TableConvertor.
type storage struct {
	res              *resource
	store            *view.Store
	bookmarkInterval time.Duration
}

var (
	_ rest.Storage                    = &storage{}
	_ rest.Scoper                     = &storage{}
	_ rest.KindProvider               = &storage{}
	_ rest.SingularNameProvider       = &storage{}
	_ rest.Getter                     = &storage{}
	_ rest.Lister                     = &storage{}
	_ rest.Watcher                    = &storage{}
	_ rest.Creater                    = &storage{}
	_ rest.Updater                    = &storage{}
	_ rest.Patcher                    = &storage{}
	_ rest.GracefulDeleter            = &storage{}
	_ rest.MayReturnFullObjectDeleter = &storage{}
	_ rest.CollectionDeleter          = &storage{}
	_ rest.TableConvertor             = &storage{}
)

// New returns an empty object of the kind, marked as a schema reference (see
// objectConvertor).
func (s *storage) New() runtime.Object {
	u := &unstructured.Unstructured{Object: map[string]any{schemaRefKey: true}}
	u.SetGroupVersionKind(s.res.gvk)
	return u
}

// NewList returns an empty <Kind>List.
func (s *storage) NewList() runtime.Object {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(s.res.gvk.GroupVersion().WithKind(s.res.gvk.Kind + "List"))
	return l
}

func (s *storage) Destroy()                         {}
func (s *storage) NamespaceScoped() bool            { return s.res.namespaced }
func (s *storage) Kind() string                     { return s.res.gvk.Kind }
func (s *storage) GetSingularName() string          { return s.res.singular }
func (s *storage) DeleteReturnsDeletedObject() bool { return true }

func (s *storage) key(ctx context.Context, name string) object.Key {
	if !s.res.namespaced {
		return object.Key{Name: name}
	}
	return object.Key{Namespace: request.NamespaceValue(ctx), Name: name}
}

// translate rewrites a store error to name the served resource, so clients
// read `deploymentsummaries.op.view.dcontroller.io "x" not found`.
func (s *storage) translate(err error, name string) error {
	if err == nil {
		return nil
	}
	gr := s.res.gvr.GroupResource()
	switch {
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	case apierrors.IsAlreadyExists(err):
		return apierrors.NewAlreadyExists(gr, name)
	case apierrors.IsConflict(err):
		return apierrors.NewConflict(gr, name, fmt.Errorf("%s", conflictReason(err)))
	}
	return err
}

// conflictReason is the cause of a store Conflict error, without the
// "Operation cannot be fulfilled on <resource> "<name>": " prefix that names
// the store's kind.
func conflictReason(err error) string {
	msg := err.Error()
	if st, ok := err.(apierrors.APIStatus); ok {
		msg = st.Status().Message
	}
	if _, cause, ok := strings.Cut(msg, "\": "); ok {
		return cause
	}
	return msg
}

// Get returns one object; NotFound when missing.
func (s *storage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := s.store.Get(s.res.gvk, s.key(ctx, name))
	return obj, s.translate(err, name)
}

func (s *storage) selection(ctx context.Context, opts *metainternalversion.ListOptions) view.ListOptions {
	sel := view.ListOptions{}
	if s.res.namespaced {
		sel.Namespace = request.NamespaceValue(ctx)
	}
	if opts != nil {
		sel.Labels = opts.LabelSelector
		sel.Fields = opts.FieldSelector
	}
	return sel
}

// List returns the selected objects as a <Kind>List, in pages when the
// client sets limit, as kube-apiserver serves a list from etcd (API
// conventions, "chunked lists"): a page holds at most limit objects sorted
// by namespace and name, and when more follow, metadata.continue is a token
// (k8s.io/apiserver's encoding: the page's resourceVersion and the key after
// its last object) and metadata.remainingItemCount their number (left unset
// with a label or field selector, as ListMeta documents). Every page of one
// list shows the store as it was at the first page's resourceVersion,
// rebuilt from the watch history (view.Store.SelectPage). Selectors apply
// before the limit.
//
// Versions, as k8s.io/apiserver's storage.ValidateListOptions: no
// resourceVersion, "0" or NotOlderThan lists the current state;
// resourceVersionMatch=Exact, or a resourceVersion with a limit and no
// match, lists that version. Errors: 400 BadRequest for a continue token
// that does not decode (or belongs to another scope), for resourceVersion
// together with continue, and for a resourceVersion that is not a number;
// 410 Gone (Expired) when the history no longer reaches back to the version
// asked for, and for a continue token, the 410 carries a token that continues
// from the same key at the current state (an inconsistent list), as
// kube-apiserver does when etcd compacted the token's version.
func (s *storage) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	po := view.PageOptions{ListOptions: s.selection(ctx, opts)}
	prefix := "/"
	if po.Namespace != "" {
		prefix = "/" + po.Namespace + "/"
	}
	var continueKey string
	if opts != nil {
		po.Limit = opts.Limit
		switch {
		case opts.Continue != "":
			key, rv, err := apistorage.DecodeContinue(opts.Continue, prefix)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
			}
			if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
				return nil, apierrors.NewBadRequest("specifying resource version is not allowed when using continue")
			}
			start, err := s.startKey(po.Namespace, strings.TrimPrefix(key, prefix))
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
			}
			po.Start, continueKey = &start, key
			if rv > 0 { // -1: continue at the current state
				po.ResourceVersion = rv
			}
		case opts.ResourceVersion != "":
			rv, err := strconv.ParseUint(opts.ResourceVersion, 10, 63)
			if err != nil {
				return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version: %v", err))
			}
			if opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact ||
				(opts.ResourceVersionMatch == "" && opts.Limit > 0 && rv > 0) {
				po.ResourceVersion = int64(rv)
			}
		}
	}
	page, err := s.store.SelectPage(s.res.gvk, po)
	if errors.Is(err, view.ErrSnapshotExpired) {
		if continueKey == "" {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("The resourceVersion for the provided list is too old: %v", err))
		}
		st := apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. " +
			"You can start a new list without the continue parameter, or use the continue token in this response to " +
			"retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - " +
			"objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
		if tok, err := apistorage.EncodeContinue(continueKey, prefix, -1); err == nil {
			st.ErrStatus.ListMeta.Continue = tok
		}
		return nil, st
	}
	if err != nil {
		return nil, err
	}
	l := s.NewList().(*unstructured.UnstructuredList)
	l.SetResourceVersion(strconv.FormatInt(page.ResourceVersion, 10))
	l.Items = make([]unstructured.Unstructured, len(page.Items))
	for i, it := range page.Items {
		l.Items[i] = *it
	}
	if page.More && len(page.Items) > 0 {
		last := page.Items[len(page.Items)-1]
		next := last.GetName() + "\x00"
		if po.Namespace == "" && s.res.namespaced {
			next = last.GetNamespace() + "/" + next
		}
		tok, err := apistorage.EncodeContinue(prefix+next, prefix, page.ResourceVersion)
		if err != nil {
			return nil, err
		}
		l.SetContinue(tok)
		if (po.Labels == nil || po.Labels.Empty()) && (po.Fields == nil || po.Fields.Empty()) {
			l.SetRemainingItemCount(&page.Remaining)
		}
	}
	return l, nil
}

// startKey is the store key a continue token's start key names: "name" in
// a namespace or for a cluster-scoped kind, "namespace/name" across
// namespaces. Names and namespaces hold no "/" (they are path segments).
func (s *storage) startKey(namespace, start string) (object.Key, error) {
	if !s.res.namespaced || namespace != "" {
		if start == "" || strings.Contains(start, "/") {
			return object.Key{}, fmt.Errorf("start key %q is not a name", start)
		}
		return object.Key{Namespace: namespace, Name: start}, nil
	}
	ns, name, ok := strings.Cut(start, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return object.Key{}, fmt.Errorf("start key %q is not namespace/name", start)
	}
	return object.Key{Namespace: ns, Name: name}, nil
}

// Watch streams the changes of the selected objects (see view.WatchOptions
// for the resourceVersion semantics). With allowWatchBookmarks the stream
// carries periodic BOOKMARK events, and with sendInitialEvents=true a bookmark
// annotated k8s.io/initial-events-end closes the initial state. A change is
// encoded once per form for all the watches that send it (watchObject), and
// counts against the watch's queue bound (view.WatchOptions.QueueBytes)
// until it has been written to the client; a watch past the bound ends with
// an ERROR event, 410 Gone (Expired), and its client lists again.
func (s *storage) Watch(ctx context.Context, opts *metainternalversion.ListOptions) (watch.Interface, error) {
	wo := view.WatchOptions{ListOptions: s.selection(ctx, opts), HoldUntilRelease: true}
	if opts != nil {
		wo.ResourceVersion = opts.ResourceVersion
		wo.SendInitialEvents = opts.SendInitialEvents
		if opts.AllowWatchBookmarks {
			wo.BookmarkInterval = s.bookmarkInterval
			wo.InitialEventsBookmark = opts.SendInitialEvents != nil && *opts.SendInitialEvents
		}
	}
	w, err := s.store.Watch(s.res.gvk, wo)
	if err != nil {
		return nil, err
	}
	return newWatchAdapter(ctx, w), nil
}

// watchAdapter turns a view.Watcher into a watch.Interface: each change
// becomes a watchObject, a bookmark a copy (the handler reads its
// annotations), and a watcher that fell behind an ERROR event with its 410.
type watchAdapter struct {
	w    *view.Watcher
	out  chan watch.Event
	done chan struct{}
	once sync.Once
}

func newWatchAdapter(ctx context.Context, w *view.Watcher) *watchAdapter {
	a := &watchAdapter{w: w, out: make(chan watch.Event), done: make(chan struct{})}
	go func() {
		defer close(a.out)
		defer w.Stop()
		for {
			var ev view.WatchEvent
			var ok bool
			select {
			case <-ctx.Done():
				return
			case <-a.done:
				return
			case ev, ok = <-w.ResultChan():
			}
			if !ok {
				if err := w.Err(); err != nil {
					a.expire(ctx, err)
				}
				return
			}
			out := watch.Event{Type: watch.EventType(ev.Type)}
			if ev.Type == view.Bookmark {
				out.Object = ev.Object.DeepCopy()
			} else {
				out.Object = newWatchObject(ev, w)
			}
			select {
			case a.out <- out:
			case <-w.Expired():
				// The client stopped reading: drop the event for the 410.
				a.expire(ctx, w.Err())
				return
			case <-ctx.Done():
				return
			case <-a.done:
				return
			}
		}
	}()
	return a
}

// expire sends the 410 Gone (Expired) of a watcher that fell behind, as the
// last event of the stream.
func (a *watchAdapter) expire(ctx context.Context, err error) {
	st := apierrors.NewResourceExpired("the watch fell behind; list again").Status()
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	}
	select {
	case a.out <- watch.Event{Type: watch.Error, Object: &st}:
	case <-ctx.Done():
	case <-a.done:
	}
}

func (a *watchAdapter) Stop()                          { a.once.Do(func() { close(a.done) }) }
func (a *watchAdapter) ResultChan() <-chan watch.Event { return a.out }

// watchObject is the object of one watch event as the watch handler sees
// it: a runtime.CacheableObject whose serialized forms (one per encoder
// identifier, which names the media type, version, transformation and the
// event type) are the change's view.Encodings, shared by every watch the
// change is sent to. The first watch to write a form encodes it from a copy
// of the object (encoders may set fields such as the kind); the others
// write the same bytes. Once the bytes are written to its client, the event
// stops counting against the watcher's queue bound.
type watchObject struct {
	obj  *unstructured.Unstructured // shared with the store: never modified
	enc  *view.Encodings
	w    *view.Watcher
	size int64
	once sync.Once
}

var _ runtime.CacheableObject = &watchObject{}

func newWatchObject(ev view.WatchEvent, w *view.Watcher) *watchObject {
	enc := ev.Encodings
	if enc == nil {
		// An initial event: the live object, encoded for this watch.
		enc = &view.Encodings{}
	}
	return &watchObject{obj: ev.Object, enc: enc, w: w, size: ev.Size}
}

// CacheEncode writes the form id of the object to out, encoding it with
// encode the first time any watch asks for it. The encoded bytes count
// against the watcher's bound while they are written.
func (o *watchObject) CacheEncode(id runtime.Identifier, encode func(runtime.Object, io.Writer) error, out io.Writer) error {
	defer o.release()
	raw, err := o.enc.Encode(string(id), func(buf io.Writer) error { return encode(o.obj.DeepCopy(), buf) })
	if err != nil {
		return err
	}
	o.w.Hold(int64(len(raw)))
	defer o.w.Release(int64(len(raw)))
	if sp, ok := out.(runtime.Splice); ok {
		sp.Splice(raw)
		return nil
	}
	_, err = out.Write(raw)
	return err
}

// release ends the count of the event against the watcher's bound.
func (o *watchObject) release() { o.once.Do(func() { o.w.Release(o.size) }) }

// GetObject returns a copy of the object, which the caller may modify.
func (o *watchObject) GetObject() runtime.Object { return o.obj.DeepCopy() }

// GetObjectKind returns the object's kind, read-only: setting it is ignored.
func (o *watchObject) GetObjectKind() schema.ObjectKind { return fixedKind(o.obj.GroupVersionKind()) }

// DeepCopyObject returns a copy of the object.
func (o *watchObject) DeepCopyObject() runtime.Object { return o.obj.DeepCopy() }

// fixedKind is a schema.ObjectKind that cannot be changed.
type fixedKind schema.GroupVersionKind

func (k fixedKind) SetGroupVersionKind(schema.GroupVersionKind) {}
func (k fixedKind) GroupVersionKind() schema.GroupVersionKind   { return schema.GroupVersionKind(k) }

// prepare checks and completes an object about to be written: the kind must
// be the served one and the namespace the request's (validate then checks
// the metadata).
func (s *storage) prepare(ctx context.Context, obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("unexpected object type %T", obj))
	}
	delete(u.Object, schemaRefKey)
	if gvk := u.GroupVersionKind(); gvk != s.res.gvk {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the object's kind %s does not match the resource %s (kind %s)", gvk, s.res.gvr, s.res.gvk))
	}
	if s.res.namespaced {
		u.SetNamespace(request.NamespaceValue(ctx))
	} else {
		u.SetNamespace("")
	}
	return u, nil
}

// validate checks metadata as kube-apiserver checks a custom resource's
// (object.ValidateMetadata): 400 BadRequest when it does not decode, 422
// Invalid with the field paths when a rule fails.
func (s *storage) validate(u *unstructured.Unstructured) error {
	return object.ValidateMetadata(u, s.res.namespaced)
}

// Create stores a new object. The server sets uid and creationTimestamp
// (the store sets resourceVersion and generation); a name is generated from
// metadata.generateName when missing. Errors: AlreadyExists, Invalid,
// BadRequest when resourceVersion is set.
func (s *storage) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	u, err := s.prepare(ctx, obj)
	if err != nil {
		return nil, err
	}
	if u.GetResourceVersion() != "" {
		return nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		u.SetName(names.SimpleNameGenerator.GenerateName(u.GetGenerateName()))
	}
	u.SetUID(types.UID(newUID()))
	u.SetCreationTimestamp(metav1.NewTime(time.Now().UTC().Truncate(time.Second)))
	u.SetDeletionTimestamp(nil)
	u.SetDeletionGracePeriodSeconds(nil)
	u.SetGeneration(0)
	if err := s.validate(u); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, u); err != nil {
			return nil, err
		}
	}
	if opts != nil && dryrun.IsDryRun(opts.DryRun) {
		u.SetGeneration(1)
		return u, nil
	}
	out, err := s.store.Create(u)
	return out, s.translate(err, u.GetName())
}

// Update replaces an object with objInfo's update of its current state
// (a PUT body or a patched copy). A write that raced with another is
// re-applied to the new state unless the client named the resourceVersion
// it expected, in which case it fails with Conflict. With forceAllowCreate
// (server-side apply) a missing object is created.
func (s *storage) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, opts *metav1.UpdateOptions) (runtime.Object, bool, error) {
	key := s.key(ctx, name)
	for attempt := 0; ; attempt++ {
		current, err := s.store.Get(s.res.gvk, key)
		if apierrors.IsNotFound(err) {
			if !forceAllowCreate {
				return nil, false, s.translate(err, name)
			}
			empty := &unstructured.Unstructured{}
			empty.SetGroupVersionKind(s.res.gvk)
			newObj, err := objInfo.UpdatedObject(ctx, empty)
			if err != nil {
				return nil, false, err
			}
			if u, ok := newObj.(*unstructured.Unstructured); ok && u.GetName() != name {
				return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), name))
			}
			co := &metav1.CreateOptions{}
			if opts != nil {
				co.DryRun, co.FieldManager, co.FieldValidation = opts.DryRun, opts.FieldManager, opts.FieldValidation
			}
			created, err := s.Create(ctx, newObj, createValidation, co)
			return created, err == nil, err
		}
		if err != nil {
			return nil, false, s.translate(err, name)
		}
		if pre := objInfo.Preconditions(); pre != nil {
			if err := (view.Preconditions{UID: ptrValue(pre.UID), ResourceVersion: ptrValue(pre.ResourceVersion)}).Check(current); err != nil {
				return nil, false, s.translate(err, name)
			}
		}
		newObj, err := objInfo.UpdatedObject(ctx, current)
		if err != nil {
			return nil, false, err
		}
		u, err := s.prepare(ctx, newObj)
		if err != nil {
			return nil, false, err
		}
		if u.GetName() != name {
			return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", u.GetName(), name))
		}
		requested := u.GetResourceVersion()
		if requested == "" {
			// An unconditional update: guard against races ourselves.
			u.SetResourceVersion(current.GetResourceVersion())
		}
		if u.GetUID() == "" {
			u.SetUID(current.GetUID())
		} else if u.GetUID() != current.GetUID() {
			return nil, false, apierrors.NewConflict(s.res.gvr.GroupResource(), name,
				fmt.Errorf("precondition failed: UID in object meta: %s does not match the stored object's: %s", u.GetUID(), current.GetUID()))
		}
		u.SetCreationTimestamp(current.GetCreationTimestamp())
		u.SetGeneration(current.GetGeneration())
		if err := s.validate(u); err != nil {
			return nil, false, err
		}
		if updateValidation != nil {
			if err := updateValidation(ctx, u, current); err != nil {
				return nil, false, err
			}
		}
		if opts != nil && dryrun.IsDryRun(opts.DryRun) {
			return u, false, nil
		}
		out, err := s.store.Update(u)
		if apierrors.IsConflict(err) && (requested == "" || requested == current.GetResourceVersion()) && attempt < maxUpdateRetries {
			continue
		}
		return out, false, s.translate(err, name)
	}
}

func ptrValue[T ~string](p *T) T {
	if p == nil {
		return ""
	}
	return *p
}

// Delete removes an object at once (the store has no graceful deletion or
// finalizers) and returns its last state. Errors: NotFound, Conflict when a
// precondition fails.
func (s *storage) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions) (runtime.Object, bool, error) {
	key := s.key(ctx, name)
	current, err := s.store.Get(s.res.gvk, key)
	if err != nil {
		return nil, false, s.translate(err, name)
	}
	pre := view.Preconditions{}
	if opts != nil && opts.Preconditions != nil {
		pre = view.Preconditions{UID: ptrValue(opts.Preconditions.UID), ResourceVersion: ptrValue(opts.Preconditions.ResourceVersion)}
	}
	if err := pre.Check(current); err != nil {
		return nil, false, s.translate(err, name)
	}
	if deleteValidation != nil {
		if err := deleteValidation(ctx, current); err != nil {
			return nil, false, err
		}
	}
	if opts != nil && dryrun.IsDryRun(opts.DryRun) {
		return current, true, nil
	}
	if pre.ResourceVersion == "" {
		pre.ResourceVersion = current.GetResourceVersion()
	}
	last, err := s.store.DeleteIf(s.res.gvk, key, pre)
	return last, err == nil, s.translate(err, name)
}

// DeleteCollection removes the selected objects and returns them as a list.
func (s *storage) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, opts *metav1.DeleteOptions, listOpts *metainternalversion.ListOptions) (runtime.Object, error) {
	sel := s.selection(ctx, listOpts)
	items, rv := s.store.Select(s.res.gvk, sel)
	if deleteValidation != nil {
		for _, it := range items {
			if err := deleteValidation(ctx, it); err != nil {
				return nil, err
			}
		}
	}
	if opts == nil || !dryrun.IsDryRun(opts.DryRun) {
		items = s.store.DeleteCollection(s.res.gvk, sel)
		rv = s.store.ResourceVersion()
	}
	l := s.NewList().(*unstructured.UnstructuredList)
	l.SetResourceVersion(rv)
	for _, it := range items {
		l.Items = append(l.Items, *it)
	}
	return l, nil
}

func newUID() string { return uuid.NewString() }
