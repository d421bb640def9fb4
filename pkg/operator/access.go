package operator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/controller"
)

// targetVerbs are the verbs a target type needs on its resource, besides
// the get/list/watch of the informer cache that serves its reads.
var targetVerbs = map[opv1a1.TargetType][]string{
	opv1a1.Updater: {"create", "update", "delete"},
	opv1a1.Patcher: {"patch"},
	opv1a1.Applier: {"patch"},
}

// accessReviews bounds the SelfSubjectAccessReviews a controller's start
// has in flight.
const accessReviews = 8

// checkAccess asks the API server (SelfSubjectAccessReview) whether the
// manager may do what the controller needs on its native sources and target,
// so that a missing RBAC rule is reported up front with the verb and the
// resource instead of as a watch that never syncs.
func (r *Runtime) checkAccess(ctx context.Context, c *controller.Controller) error {
	if r.opts.Client == nil || r.opts.RESTMapper == nil {
		return nil
	}
	type need struct {
		path  string
		gvk   schema.GroupVersionKind
		verbs []string
	}
	var needs []need
	for i, s := range c.Sources() {
		if s.Type == opv1a1.OneShot || s.Type == opv1a1.Periodic || r.isView(s.GVK) {
			continue
		}
		// One cluster-wide informer per kind serves every controller, so a
		// source restricted to a namespace is still watched cluster-wide.
		needs = append(needs, need{fmt.Sprintf("sources[%d]", i), s.GVK, []string{"get", "list", "watch"}})
	}
	for _, t := range c.Targets() {
		if r.isView(t.GVK) {
			continue
		}
		verbs := append([]string{"get", "list", "watch"}, targetVerbs[t.Type]...)
		_, rel, _ := strings.Cut(t.Path, "].")
		needs = append(needs, need{rel, t.GVK, verbs})
	}
	// Each distinct (resource, verb) is asked once, up to accessReviews at
	// a time: the reviews are independent, and a controller's start waits
	// for them.
	type ask struct {
		res  schema.GroupVersionResource
		verb string
	}
	// answer is one review's outcome, written by its own goroutine.
	type answer struct {
		allowed bool
		err     error
	}
	mappings := make([]schema.GroupVersionResource, len(needs))
	answers := map[ask]*answer{}
	for i, n := range needs {
		m, err := r.opts.RESTMapper.RESTMapping(n.gvk.GroupKind(), n.gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: kind %s: %w", n.path, n.gvk, err)
		}
		mappings[i] = m.Resource
		for _, verb := range n.verbs {
			if a := (ask{m.Resource, verb}); answers[a] == nil {
				answers[a] = &answer{}
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, accessReviews)
	for a, ans := range answers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Group: a.res.Group, Version: a.res.Version, Resource: a.res.Resource,
				},
			}}
			ans.err = r.opts.Client.Create(ctx, review)
			ans.allowed = ans.err == nil && review.Status.Allowed
		})
	}
	wg.Wait()
	for i, n := range needs {
		var missing []string
		for _, verb := range n.verbs {
			ans := answers[ask{mappings[i], verb}]
			if ans.err != nil {
				return fmt.Errorf("%s: checking RBAC access: %w", n.path, ans.err)
			}
			if !ans.allowed {
				missing = append(missing, verb)
			}
		}
		if len(missing) > 0 {
			return &forbiddenError{fmt.Sprintf("%s: forbidden: the manager may not %s resource %q in API group %q cluster-wide; grant these verbs to its service account (see `dctl rbac`)",
				n.path, strings.Join(missing, ", "), mappings[i].Resource, mappings[i].Group)}
		}
	}
	return nil
}

// forbiddenError is a missing RBAC permission.
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }
