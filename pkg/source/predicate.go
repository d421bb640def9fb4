package source

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Predicate decides whether an update of an object is passed to the
// controller. Creations and deletions always pass.
type Predicate interface {
	// Update reports whether the change from old to new passes.
	Update(old, new client.Object) bool
	// String renders the predicate in its spec form.
	String() string
}

// The named predicates, with the semantics of controller-runtime's predicates
// of the same names.
var namedPredicates = map[string]predicate.Predicate{
	"GenerationChanged":      predicate.GenerationChangedPredicate{},
	"ResourceVersionChanged": predicate.ResourceVersionChangedPredicate{},
	"LabelChanged":           predicate.LabelChangedPredicate{},
	"AnnotationChanged":      predicate.AnnotationChangedPredicate{},
}

// PredicateNames returns the names of the basic predicates, sorted.
func PredicateNames() []string {
	out := make([]string, 0, len(namedPredicates))
	for n := range namedPredicates {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type named struct {
	name string
	p    predicate.Predicate
}

func (n named) Update(old, new client.Object) bool {
	return n.p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: new})
}
func (n named) String() string { return n.name }

type and []Predicate

func (a and) Update(old, new client.Object) bool {
	for _, p := range a {
		if !p.Update(old, new) {
			return false
		}
	}
	return true
}
func (a and) String() string { return "and(" + join(a) + ")" }

type or []Predicate

func (o or) Update(old, new client.Object) bool {
	for _, p := range o {
		if p.Update(old, new) {
			return true
		}
	}
	return false
}
func (o or) String() string { return "or(" + join(o) + ")" }

type not struct{ p Predicate }

func (n not) Update(old, new client.Object) bool { return !n.p.Update(old, new) }
func (n not) String() string                     { return "not(" + n.p.String() + ")" }

func join(ps []Predicate) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// ParsePredicate parses a predicate spec: one of the names GenerationChanged,
// ResourceVersionChanged, LabelChanged, AnnotationChanged, or a single-key map
// {"and": [p, ...]}, {"or": [p, ...]}, {"not": p}. raw is JSON; path is the
// spec path used in errors.
func ParsePredicate(raw []byte, path string) (Predicate, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return parsePredicate(v, path)
}

func parsePredicate(v any, path string) (Predicate, error) {
	switch t := v.(type) {
	case string:
		p, ok := namedPredicates[t]
		if !ok {
			return nil, fmt.Errorf("%s: unknown predicate %q (want one of %s, or and/or/not)", path, t, strings.Join(PredicateNames(), ", "))
		}
		return named{name: t, p: p}, nil
	case map[string]any:
		if len(t) != 1 {
			return nil, fmt.Errorf("%s: a predicate map must have exactly one key (and, or, not)", path)
		}
		for k, arg := range t {
			sub := path + "." + k
			switch k {
			case "and", "or":
				list, ok := arg.([]any)
				if !ok || len(list) == 0 {
					return nil, fmt.Errorf("%s: want a non-empty list of predicates", sub)
				}
				ps := make([]Predicate, 0, len(list))
				for i, e := range list {
					p, err := parsePredicate(e, fmt.Sprintf("%s[%d]", sub, i))
					if err != nil {
						return nil, err
					}
					ps = append(ps, p)
				}
				if k == "and" {
					return and(ps), nil
				}
				return or(ps), nil
			case "not":
				p, err := parsePredicate(arg, sub)
				if err != nil {
					return nil, err
				}
				return not{p}, nil
			default:
				return nil, fmt.Errorf("%s: unknown predicate operator %q (want and, or, not)", path, k)
			}
		}
	}
	return nil, fmt.Errorf("%s: a predicate is a name or a map with and/or/not, got %T", path, v)
}

// DefaultPeriod is the period of a Periodic source without parameters.period.
const DefaultPeriod = 5 * time.Minute

// ParsePeriod reads parameters.period (a Go duration string such as "30s")
// of a Periodic source; raw may be nil (DefaultPeriod). The period must be
// positive.
func ParsePeriod(raw []byte, path string) (time.Duration, error) {
	if len(raw) == 0 {
		return DefaultPeriod, nil
	}
	var params struct {
		Period string `json:"period"`
	}
	if err := json.Unmarshal(raw, &params); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if params.Period == "" {
		return DefaultPeriod, nil
	}
	d, err := time.ParseDuration(params.Period)
	if err != nil {
		return 0, fmt.Errorf("%s.period: %w", path, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s.period: must be positive, got %s", path, d)
	}
	return d, nil
}
