package expression

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// prepareSelector converts a literal selector at parse time.
func prepareSelector(c *call) error {
	lit, ok := c.args[0].(*literal)
	if !ok {
		return nil
	}
	sel, err := toSelector(lit.v)
	if err != nil {
		return c.errorf("%v", err)
	}
	c.sel = sel
	return nil
}

// opSelector implements @selector [labelSelector, labels]: whether the
// labels match the selector, with Kubernetes label selector semantics
// (metav1.LabelSelectorAsSelector). See toSelector for the selector forms.
// labels is a map of strings; null is the empty label set.
func opSelector(c *call, s, l any) (any, error) {
	sel := c.sel
	if sel == nil {
		var err error
		if sel, err = toSelector(s); err != nil {
			return nil, c.errorf("%v", err)
		}
	}
	set := labels.Set{}
	switch x := l.(type) {
	case nil:
	case map[string]any:
		for k, v := range x {
			vs, ok := v.(string)
			if !ok {
				return nil, c.errorf("label %q must be a string, got %s", k, typeName(v))
			}
			set[k] = vs
		}
	default:
		return nil, c.errorf("argument 2 must be a map of labels, got %s", typeName(l))
	}
	return sel.Matches(set), nil
}

// toSelector converts a selector value to a labels.Selector. Accepted forms:
//
//   - a metav1.LabelSelector: a map whose keys are among "matchLabels" and
//     "matchExpressions" (operators In, NotIn, Exists, DoesNotExist); the
//     empty map selects everything;
//   - a plain map of label values such as a Service's spec.selector, meaning
//     equality on every key (the empty map selects everything);
//   - null, which selects nothing (as a nil *metav1.LabelSelector).
func toSelector(v any) (labels.Selector, error) {
	if v == nil {
		return labels.Nothing(), nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("label selector must be a map, got %s", typeName(v))
	}
	structured := true
	for k := range m {
		if k != "matchLabels" && k != "matchExpressions" {
			structured = false
			break
		}
	}
	ls := &metav1.LabelSelector{}
	if !structured {
		ml, err := stringMap(m, "selector")
		if err != nil {
			return nil, err
		}
		ls.MatchLabels = ml
	} else {
		if x, ok := m["matchLabels"]; ok && x != nil {
			mm, ok := x.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("matchLabels must be a map, got %s", typeName(x))
			}
			ml, err := stringMap(mm, "matchLabels")
			if err != nil {
				return nil, err
			}
			ls.MatchLabels = ml
		}
		if x, ok := m["matchExpressions"]; ok && x != nil {
			l, ok := x.([]any)
			if !ok {
				return nil, fmt.Errorf("matchExpressions must be a list, got %s", typeName(x))
			}
			for i, e := range l {
				req, err := toRequirement(e)
				if err != nil {
					return nil, fmt.Errorf("matchExpressions[%d]: %w", i, err)
				}
				ls.MatchExpressions = append(ls.MatchExpressions, req)
			}
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("invalid label selector: %w", err)
	}
	return sel, nil
}

func stringMap(m map[string]any, what string) (map[string]string, error) {
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("%s value of %q must be a string, got %s", what, k, typeName(v))
		}
		out[k] = s
	}
	return out, nil
}

func toRequirement(e any) (metav1.LabelSelectorRequirement, error) {
	var req metav1.LabelSelectorRequirement
	m, ok := e.(map[string]any)
	if !ok {
		return req, fmt.Errorf("must be a map, got %s", typeName(e))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		x := m[k]
		switch k {
		case "key", "operator":
			s, ok := x.(string)
			if !ok {
				return req, fmt.Errorf("%s must be a string, got %s", k, typeName(x))
			}
			if k == "key" {
				req.Key = s
			} else {
				req.Operator = metav1.LabelSelectorOperator(s)
			}
		case "values":
			if x == nil {
				continue
			}
			l, ok := x.([]any)
			if !ok {
				return req, fmt.Errorf("values must be a list, got %s", typeName(x))
			}
			for _, v := range l {
				s, ok := v.(string)
				if !ok {
					return req, fmt.Errorf("values must be strings, got %s", typeName(v))
				}
				req.Values = append(req.Values, s)
			}
		default:
			return req, fmt.Errorf("unknown field %q", k)
		}
	}
	return req, nil
}
