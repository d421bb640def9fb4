package apiserver

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/pager"

	"github.com/dcontroller/dcontroller/pkg/view"
)

var summaryGVR = schema.GroupVersionResource{Group: "op.view.dcontroller.io", Version: "v1alpha1", Resource: "summaries"}

func chunkedServer(t *testing.T, store *view.Store) dynamic.Interface {
	t.Helper()
	_, base := testServer(t, store, Options{Kinds: func() []schema.GroupVersionKind { return []schema.GroupVersionKind{summaryGVK} }})
	dc, err := dynamic.NewForConfig(&rest.Config{Host: base})
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

func listed(items []unstructured.Unstructured) string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.GetNamespace() + "/" + it.GetName()
		if n, ok, _ := unstructured.NestedInt64(it.Object, "spec", "n"); ok {
			out[i] += fmt.Sprintf("=%d", n)
		}
	}
	return strings.Join(out, " ")
}

// TestChunkedList: a list with limit comes in pages that follow continue,
// each at most limit objects, all at the first page's resourceVersion while
// objects are created, updated and deleted between the pages; selectors
// apply before the limit; remainingItemCount is set without a selector.
func TestChunkedList(t *testing.T) {
	store := view.NewStore()
	for _, ns := range []string{"a", "b"} {
		for i := 0; i < 4; i++ {
			obj := summary(ns, fmt.Sprintf("s%d", i), map[string]any{"n": int64(0)})
			obj.SetLabels(map[string]string{"even": fmt.Sprint(i%2 == 0)})
			if _, err := store.Create(obj); err != nil {
				t.Fatal(err)
			}
		}
	}
	dc := chunkedServer(t, store)
	ctx := context.Background()
	all := dc.Resource(summaryGVR)

	first, err := all.List(ctx, metav1.ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed(first.Items); got != "a/s0=0 a/s1=0 a/s2=0" {
		t.Errorf("first page: %s", got)
	}
	if rc := first.GetRemainingItemCount(); rc == nil || *rc != 5 || first.GetContinue() == "" {
		t.Errorf("first page: remainingItemCount %v, continue %q; want 5 and a token", rc, first.GetContinue())
	}
	// Changes between the pages are not seen by the rest of the list.
	if err := store.Delete(summaryGVK, objectKey("b", "s3")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Update(summary("a", "s3", map[string]any{"n": int64(7)})); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(summary("a", "s9", nil)); err != nil {
		t.Fatal(err)
	}
	var got []string
	for tok := first.GetContinue(); tok != ""; {
		page, err := all.List(ctx, metav1.ListOptions{Limit: 3, Continue: tok})
		if err != nil {
			t.Fatal(err)
		}
		if page.GetResourceVersion() != first.GetResourceVersion() {
			t.Errorf("page at resourceVersion %s, the list began at %s", page.GetResourceVersion(), first.GetResourceVersion())
		}
		got = append(got, listed(page.Items))
		tok = page.GetContinue()
	}
	if want := "a/s3=0 b/s0=0 b/s1=0|b/s2=0 b/s3=0"; strings.Join(got, "|") != want {
		t.Errorf("later pages: %q, want the first page's snapshot %q", strings.Join(got, "|"), want)
	}

	// A selector applies before the limit; no remainingItemCount then.
	sel, err := all.List(ctx, metav1.ListOptions{Limit: 2, LabelSelector: "even=true"})
	if err != nil {
		t.Fatal(err)
	}
	if got := listed(sel.Items); got != "a/s0=0 a/s2=0" || sel.GetRemainingItemCount() != nil || sel.GetContinue() == "" {
		t.Errorf("selected page: %s, remainingItemCount %v, continue %q", got, sel.GetRemainingItemCount(), sel.GetContinue())
	}
	rest2, err := all.List(ctx, metav1.ListOptions{Limit: 2, LabelSelector: "even=true", Continue: sel.GetContinue()})
	if err != nil || listed(rest2.Items) != "b/s0=0 b/s2=0" || rest2.GetContinue() != "" {
		t.Errorf("second selected page: %v %v, continue %q", err, listed(rest2.Items), rest2.GetContinue())
	}

	// In one namespace, at the current state.
	nsPage, err := dc.Resource(summaryGVR).Namespace("a").List(ctx, metav1.ListOptions{Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	nsRest, err := dc.Resource(summaryGVR).Namespace("a").List(ctx, metav1.ListOptions{Limit: 4, Continue: nsPage.GetContinue()})
	if err != nil || listed(nsPage.Items)+"|"+listed(nsRest.Items) != "a/s0=0 a/s1=0 a/s2=0 a/s3=7|a/s9" {
		t.Errorf("namespace a: %v %s|%s", err, listed(nsPage.Items), listed(nsRest.Items))
	}
	// A token of one scope is refused in another.
	if _, err := dc.Resource(summaryGVR).Namespace("a").List(ctx, metav1.ListOptions{Limit: 3, Continue: first.GetContinue()}); !apierrors.IsBadRequest(err) {
		t.Errorf("an all-namespaces token in a namespace: %v, want 400", err)
	}
}

// TestChunkedListErrors: bad tokens and resourceVersion with continue are
// 400; a token whose version the history no longer reaches is 410 Expired
// with a token that continues at the current state; an exact list of a
// version the history still reaches is served.
func TestChunkedListErrors(t *testing.T) {
	store := view.NewStoreWithOptions(view.Options{HistoryLimit: 4})
	dc := chunkedServer(t, store)
	for i := 0; i < 5; i++ {
		if _, err := store.Create(summary("a", fmt.Sprintf("s%d", i), nil)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	all := dc.Resource(summaryGVR)
	first, err := all.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]metav1.ListOptions{
		"not base64":                 {Limit: 2, Continue: "%%%"},
		"not a token":                {Limit: 2, Continue: "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MX0"}, // {"v":"meta.k8s.io/v1","rv":1}
		"resourceVersion + continue": {Limit: 2, Continue: first.GetContinue(), ResourceVersion: first.GetResourceVersion()},
	} {
		if _, err := all.List(ctx, opts); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: %v, want 400 BadRequest", name, err)
		}
	}
	if _, err := all.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.GetContinue(), ResourceVersion: "1",
		ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsInvalid(err) {
		t.Errorf("resourceVersionMatch + continue: %v, want 422 Invalid", err)
	}
	// The server's store counts from a random epoch: the list's version
	// less one is that of the fourth object's creation, still in history.
	rv0, _ := strconv.ParseInt(first.GetResourceVersion(), 10, 64)
	before := strconv.FormatInt(rv0-1, 10)
	old, err := all.List(ctx, metav1.ListOptions{ResourceVersion: before, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		t.Fatalf("exact list of a version the history holds: %v", err)
	}
	if len(old.Items) != 4 || old.GetResourceVersion() != before {
		t.Errorf("exact list of a version the history holds: %v, %d items at %s", err, len(old.Items), old.GetResourceVersion())
	}
	// Five more changes: the history (4) no longer reaches the first page.
	for i := 0; i < 5; i++ {
		if _, err := store.Update(summary("a", "s4", map[string]any{"n": int64(i)})); err != nil {
			t.Fatal(err)
		}
	}
	_, err = all.List(ctx, metav1.ListOptions{Limit: 2, Continue: first.GetContinue()})
	st, ok := err.(apierrors.APIStatus)
	if !apierrors.IsResourceExpired(err) || !ok || st.Status().Continue == "" {
		t.Fatalf("continue after the history moved on: %v, want 410 Expired with a continue token", err)
	}
	rest, err := all.List(ctx, metav1.ListOptions{Limit: 10, Continue: st.Status().Continue})
	if err != nil || listed(rest.Items) != "a/s2 a/s3 a/s4=4" || rest.GetResourceVersion() != store.ResourceVersion() {
		t.Errorf("inconsistent continue: %v %s at %s", err, listed(rest.Items), rest.GetResourceVersion())
	}
	if _, err := all.List(ctx, metav1.ListOptions{ResourceVersion: before, ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsResourceExpired(err) {
		t.Errorf("exact list of a dropped version: %v, want 410 Expired", err)
	}
}

// TestChunkedListPager: client-go's pager with a page size of 2 lists 9
// objects in 5 requests while one object is deleted and one updated after
// every page, and sees the first page's state throughout.
func TestChunkedListPager(t *testing.T) {
	store := view.NewStore()
	for i := 0; i < 9; i++ {
		if _, err := store.Create(summary("a", fmt.Sprintf("s%d", i), map[string]any{"n": int64(0)})); err != nil {
			t.Fatal(err)
		}
	}
	dc := chunkedServer(t, store)
	requests, victim := 0, 8
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		requests++
		l, err := dc.Resource(summaryGVR).Namespace("a").List(ctx, opts)
		if err == nil && victim >= 0 {
			_ = store.Delete(summaryGVK, objectKey("a", fmt.Sprintf("s%d", victim)))
			_, _ = store.Update(summary("a", fmt.Sprintf("s%d", 8-victim), map[string]any{"n": int64(1)}))
			victim--
		}
		return l, err
	})
	p.PageSize = 2
	var l unstructured.UnstructuredList
	err := p.EachListItem(context.Background(), metav1.ListOptions{}, func(obj runtime.Object) error {
		l.Items = append(l.Items, *obj.(*unstructured.Unstructured))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "a/s0=0 a/s1=0 a/s2=0 a/s3=0 a/s4=0 a/s5=0 a/s6=0 a/s7=0 a/s8=0"
	if got := listed(l.Items); got != want || requests != 5 {
		t.Errorf("pager: %d requests, %s; want 5 requests, %s", requests, got, want)
	}
}
