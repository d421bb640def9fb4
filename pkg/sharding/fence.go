package sharding

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNotFenced is wrapped by the errors of Fence and of the writes of a
// client from FenceWrites while this member does not hold its fence.
var ErrNotFenced = errors.New("not fenced")

// Fence reports whether this member holds its fence now: the last
// successful renewal of its member Lease started less than RenewDeadline
// ago, measured on the monotonic clock (a process that was stopped, by
// SIGSTOP or a stalled node, sees the whole stop as elapsed). Other
// members take this member's buckets only once its Lease was not renewed
// for LeaseDuration on their clocks, so a write made while the fence is
// held cannot overlap another member's work on the same bucket. The renew
// loop gives all work up once the fence is lost, but a sync that was
// running when the process stopped resumes before that loop does: call
// Fence right before each write. It returns nil for a nil Ring (sharding
// off), else an error wrapping ErrNotFenced that names the member Lease
// and how long ago it was renewed.
func (r *Ring) Fence() error {
	if r == nil {
		return nil
	}
	at := r.fenceAt.Load()
	if at == 0 {
		return fmt.Errorf("sharding: ring %q member %q: %w: the member Lease %s/%s was not renewed yet; write refused",
			r.opts.Ring, r.opts.Identity, ErrNotFenced, r.opts.Namespace, r.memberName)
	}
	if since := time.Since(r.epoch) - time.Duration(at-1); since >= r.opts.RenewDeadline {
		return fmt.Errorf("sharding: ring %q member %q: %w: the member Lease %s/%s was last renewed %s ago, past the renew deadline %s; write refused",
			r.opts.Ring, r.opts.Identity, ErrNotFenced, r.opts.Namespace, r.memberName, since.Round(time.Millisecond), r.opts.RenewDeadline)
	}
	return nil
}

// write runs f, a write, when this member holds its fence, with ctx
// bounded by the end of the fence (the start of the last renewal plus
// RenewDeadline): a write whose process is stopped after the check and
// resumed past that end is stopped by client-go's and the HTTP transport's
// context checks, unless its request was already on its way. Its error
// then wraps ErrNotFenced too.
func (r *Ring) write(ctx context.Context, f func(ctx context.Context) error) error {
	if err := r.Fence(); err != nil {
		return err
	}
	end := r.epoch.Add(time.Duration(r.fenceAt.Load()-1) + r.opts.RenewDeadline)
	fctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	err := f(fctx)
	if err != nil && ctx.Err() == nil && errors.Is(fctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("sharding: ring %q member %q: %w: the member Lease %s/%s was not renewed within the renew deadline %s during the write: %w",
			r.opts.Ring, r.opts.Identity, ErrNotFenced, r.opts.Namespace, r.memberName, r.opts.RenewDeadline, err)
	}
	return err
}

// fenced records a successful renewal of the member Lease that started
// at start (a time.Now() reading, monotonic clock included).
func (r *Ring) fenced(start time.Time) {
	// +1: 0 means never renewed.
	r.fenceAt.Store(int64(start.Sub(r.epoch)) + 1)
}

// FenceWrites returns c whose writes (Create, Update, Patch, Delete,
// DeleteAllOf, Apply, and those of Status() and SubResource()) first check
// r.Fence and fail with its error, sending nothing, when this member does
// not hold its fence; a write that passed the check runs with a context
// that ends with the fence. Reads pass through. A nil Ring returns c
// itself.
// Give the result to every write path that works the ring's buckets.
func FenceWrites(c client.Client, r *Ring) client.Client {
	if r == nil || c == nil {
		return c
	}
	return fencedClient{Client: c, ring: r}
}

type fencedClient struct {
	client.Client
	ring *Ring
}

func (c fencedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.Create(ctx, obj, opts...) })
}

func (c fencedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.Update(ctx, obj, opts...) })
}

func (c fencedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c fencedClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.Delete(ctx, obj, opts...) })
}

func (c fencedClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.DeleteAllOf(ctx, obj, opts...) })
}

func (c fencedClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return c.ring.write(ctx, func(ctx context.Context) error { return c.Client.Apply(ctx, obj, opts...) })
}

func (c fencedClient) Status() client.SubResourceWriter {
	return fencedSubResource{SubResourceWriter: c.Client.Status(), ring: c.ring}
}

func (c fencedClient) SubResource(name string) client.SubResourceClient {
	sc := c.Client.SubResource(name)
	return struct {
		client.SubResourceReader
		client.SubResourceWriter
	}{sc, fencedSubResource{SubResourceWriter: sc, ring: c.ring}}
}

type fencedSubResource struct {
	client.SubResourceWriter
	ring *Ring
}

func (w fencedSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	return w.ring.write(ctx, func(ctx context.Context) error { return w.SubResourceWriter.Create(ctx, obj, sub, opts...) })
}

func (w fencedSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	return w.ring.write(ctx, func(ctx context.Context) error { return w.SubResourceWriter.Update(ctx, obj, opts...) })
}

func (w fencedSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.ring.write(ctx, func(ctx context.Context) error { return w.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

func (w fencedSubResource) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	return w.ring.write(ctx, func(ctx context.Context) error { return w.SubResourceWriter.Apply(ctx, obj, opts...) })
}
