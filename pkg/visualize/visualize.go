package visualize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
)

// NodeKind says what a node stands for.
type NodeKind int

const (
	// Resource is a native Kubernetes kind.
	Resource NodeKind = iota
	// View is an in-memory view kind of an operator.
	View
	// Stage is one pipeline stage of a controller.
	Stage
	// Stream is a named stream between the branches of a controller's
	// pipeline in branch form: written by the branches whose @output names
	// it, read by those whose @inputs name it.
	Stream
)

// Node is a box of the graph.
type Node struct {
	ID    string
	Kind  NodeKind
	Label []string // lines
	// Operator and Controller place the node: views belong to an operator,
	// stages to a controller; native resources to neither.
	Operator, Controller string
}

// Edge is an arrow; Label may be empty.
type Edge struct {
	From, To, Label string
}

// Controller is the group of a controller's stages.
type Controller struct {
	ID, Name string
	// Stages are node IDs in pipeline order (branch after branch in the
	// branch form), then the controller's stream nodes.
	Stages []string
}

// Operator is the group of an operator's views and controllers.
type Operator struct {
	ID, Name    string
	Views       []string // node IDs
	Controllers []Controller
}

// Graph is the dataflow of a set of operators.
type Graph struct {
	Nodes     map[string]*Node
	Resources []string // native resource node IDs, in order of first use
	Operators []Operator
	Edges     []Edge
}

// maxArg bounds the length of a stage's argument summary.
const maxArg = 48

// Build returns the dataflow graph of ops. The error names the operator and
// the spec path of a pipeline that is not a stage or a list of stages.
func Build(ops []*opv1a1.Operator) (*Graph, error) {
	g := &Graph{Nodes: map[string]*Node{}}
	for oi, op := range ops {
		gop := Operator{ID: fmt.Sprintf("op%d", oi), Name: op.Name}
		kindNode := func(r opv1a1.Resource, namespace string) string {
			if r.APIGroup == nil || opv1a1.IsViewGroup(*r.APIGroup) {
				owner := op.Name
				if r.APIGroup != nil {
					owner = strings.TrimSuffix(*r.APIGroup, "."+opv1a1.ViewGroupSuffix)
				}
				id := "view_" + ident(owner) + "_" + ident(r.Kind)
				if g.Nodes[id] == nil {
					g.Nodes[id] = &Node{ID: id, Kind: View, Label: []string{r.Kind, "view"}, Operator: owner}
					if owner == op.Name {
						gop.Views = append(gop.Views, id)
					} else {
						g.Resources = append(g.Resources, id)
					}
				}
				return id
			}
			group := *r.APIGroup
			id := "res_" + ident(group) + "_" + ident(r.Kind)
			if namespace != "" {
				id += "_ns_" + ident(namespace)
			}
			if g.Nodes[id] == nil {
				gv := group
				if r.Version != nil && *r.Version != "" {
					if gv == "" {
						gv = *r.Version
					} else {
						gv += "/" + *r.Version
					}
				}
				if gv == "" {
					gv = "core"
				}
				label := []string{r.Kind, gv}
				if namespace != "" {
					label = append(label, "namespace "+namespace)
				}
				g.Nodes[id] = &Node{ID: id, Kind: Resource, Label: label}
				g.Resources = append(g.Resources, id)
			}
			return id
		}
		for ci, c := range op.Spec.Controllers {
			cid := fmt.Sprintf("%s_c%d", gop.ID, ci)
			gc := Controller{ID: cid, Name: c.Name}
			branches, err := branchesOf(c.Pipeline.Raw)
			if err != nil {
				return nil, fmt.Errorf("operator %q: spec.controllers[%d].pipeline%w", op.Name, ci, err)
			}
			targets := targetsOf(c)
			// The first and last stage node of each branch.
			firsts, lasts := make([]string, len(branches)), make([]string, len(branches))
			for bi, b := range branches {
				stages := b.stages
				if len(stages) == 0 {
					stages = []stage{{name: "(identity)"}}
				}
				for si, s := range stages {
					id := fmt.Sprintf("%s_s%d", cid, len(gc.Stages))
					if len(branches) > 1 || b.explicit {
						id = fmt.Sprintf("%s_b%d_s%d", cid, bi, si)
					}
					label := []string{s.name}
					if s.arg != "" {
						label = append(label, s.arg)
					}
					g.Nodes[id] = &Node{ID: id, Kind: Stage, Label: label, Operator: op.Name, Controller: c.Name}
					gc.Stages = append(gc.Stages, id)
					if si > 0 {
						g.Edges = append(g.Edges, Edge{From: gc.Stages[len(gc.Stages)-2], To: id})
					} else {
						firsts[bi] = id
					}
					lasts[bi] = id
				}
			}
			// Streams: a name some branch reads that is no source kind.
			sourceKinds := map[string]bool{}
			for _, s := range c.Sources {
				sourceKinds[s.Kind] = true
			}
			stream := map[string]string{} // name -> node ID
			for _, b := range branches {
				for _, in := range b.inputs {
					if sourceKinds[in] || stream[in] != "" {
						continue
					}
					id := fmt.Sprintf("%s_st_%s", cid, ident(in))
					stream[in] = id
					g.Nodes[id] = &Node{ID: id, Kind: Stream, Label: []string{in, "stream"}, Operator: op.Name, Controller: c.Name}
					gc.Stages = append(gc.Stages, id)
				}
			}
			for _, s := range c.Sources {
				ns := ""
				if s.Namespace != nil {
					ns = *s.Namespace
				}
				label := ""
				switch s.Type {
				case opv1a1.OneShot, opv1a1.Periodic:
					label = string(s.Type)
				}
				if s.LabelSelector != nil {
					label = strings.TrimSpace(label + " selected")
				}
				from := kindNode(s.Resource, ns)
				for bi, b := range branches {
					if b.inputs == nil || slices.Contains(b.inputs, s.Kind) {
						g.Edges = append(g.Edges, Edge{From: from, To: firsts[bi], Label: label})
					}
				}
			}
			for bi, b := range branches {
				for _, in := range b.inputs {
					if id := stream[in]; id != "" && !sourceKinds[in] {
						g.Edges = append(g.Edges, Edge{From: id, To: firsts[bi]})
					}
				}
			}
			// Outputs: to the stream of their name if a branch reads it,
			// else to the target of their name; a stream that is also a
			// target goes on to it.
			for bi, b := range branches {
				out := b.output
				if out == "" && len(targets) > 0 {
					out = targets[0].name
				}
				if id := stream[out]; id != "" {
					g.Edges = append(g.Edges, Edge{From: lasts[bi], To: id})
					continue
				}
				for _, t := range targets {
					if t.name == out {
						g.Edges = append(g.Edges, Edge{From: lasts[bi], To: kindNode(t.res, ""), Label: t.typ})
					}
				}
			}
			for _, t := range targets {
				if id := stream[t.name]; id != "" {
					g.Edges = append(g.Edges, Edge{From: id, To: kindNode(t.res, ""), Label: t.typ})
				}
			}
			gop.Controllers = append(gop.Controllers, gc)
		}
		g.Operators = append(g.Operators, gop)
	}
	return g, nil
}

type stage struct{ name, arg string }

// branch is one branch of a pipeline: the whole pipeline unless it is in
// branch form.
type branch struct {
	inputs   []string // @inputs; nil: all the sources
	output   string   // @output; "": the (first) target
	explicit bool     // written with @inputs or @output
	stages   []stage  // without the directives
}

// target is a controller's target: its name (its name field, else its
// kind), resource and type.
type target struct {
	name string
	res  opv1a1.Resource
	typ  string
}

// targetsOf returns the targets of a controller, in spec order.
func targetsOf(c opv1a1.Controller) []target {
	var out []target
	for _, t := range c.AllTargets() {
		typ := t.Type
		if typ == "" {
			typ = opv1a1.Updater
		}
		name := t.Name
		if name == "" {
			name = t.Kind
		}
		out = append(out, target{name: name, res: t.Resource, typ: string(typ)})
	}
	return out
}

// branchesOf splits a raw pipeline into its branches, each with its stages
// and a one-line summary of each argument. A list of lists is the branch
// form; anything else is one branch. The error's text starts with the
// path below the pipeline ("[1][0]: ...") or with ": ".
func branchesOf(raw []byte) ([]branch, error) {
	if len(raw) == 0 {
		return []branch{{}}, nil
	}
	var spec any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	l, ok := spec.([]any)
	if !ok || !slices.ContainsFunc(l, func(e any) bool { _, ok := e.([]any); return ok }) {
		b, err := branchOf(spec)
		if err != nil {
			return nil, err
		}
		return []branch{b}, nil
	}
	out := make([]branch, 0, len(l))
	for i, e := range l {
		if _, ok := e.([]any); !ok {
			return nil, fmt.Errorf("[%d]: a pipeline in branch form is a list of branches, each a list of stages", i)
		}
		b, err := branchOf(e)
		if err != nil {
			return nil, fmt.Errorf("[%d]%w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// branchOf reads one branch: a stage or a list of stages, @inputs and
// @output among them.
func branchOf(spec any) (branch, error) {
	var b branch
	var list []any
	switch s := spec.(type) {
	case nil:
		return b, nil
	case []any:
		list = s
	case map[string]any:
		list = []any{s}
	default:
		return b, fmt.Errorf(": a pipeline must be a stage or a list of stages, got %T", spec)
	}
	for i, st := range list {
		m, ok := st.(map[string]any)
		if !ok || len(m) != 1 {
			return b, fmt.Errorf("[%d]: a pipeline stage must be a map with a single \"@stage\" key", i)
		}
		for name, arg := range m {
			switch name {
			case "@inputs":
				b.explicit = true
				b.inputs = []string{}
				l, _ := arg.([]any)
				for _, e := range l {
					if s, ok := e.(string); ok {
						b.inputs = append(b.inputs, s)
					}
				}
			case "@output":
				b.explicit = true
				b.output, _ = arg.(string)
			default:
				b.stages = append(b.stages, stage{name: name, arg: summary(arg)})
			}
		}
	}
	return b, nil
}

// summary renders an argument on one line in a JSON-like flow style
// without quotes ({@not: $.status.ready}), shortened to maxArg runes.
func summary(arg any) string {
	if arg == nil {
		return ""
	}
	var b strings.Builder
	flow(&b, arg)
	s := []rune(b.String())
	if len(s) > maxArg {
		return string(s[:maxArg-1]) + "…"
	}
	return string(s)
}

func flow(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteString(": ")
			flow(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			flow(b, e)
		}
		b.WriteByte(']')
	case string:
		b.WriteString(x)
	default:
		j, _ := json.Marshal(x)
		b.Write(j)
	}
}

// ident turns s into an identifier made of letters, digits and '_'.
func ident(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "core"
	}
	return b.String()
}

// Mermaid writes the graph as a Mermaid flowchart (left to right):
// operators and controllers are subgraphs, native resources are rounded
// boxes, views are cylinders, stages rectangles and the streams between
// branches parallelograms.
func (g *Graph) Mermaid(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("flowchart LR\n")
	node := func(indent, id string) {
		n := g.Nodes[id]
		label := mermaidText(n.Label)
		switch n.Kind {
		case Resource:
			fmt.Fprintf(&b, "%s%s([\"%s\"])\n", indent, id, label)
		case View:
			fmt.Fprintf(&b, "%s%s[(\"%s\")]\n", indent, id, label)
		case Stream:
			fmt.Fprintf(&b, "%s%s[/\"%s\"/]\n", indent, id, label)
		default:
			fmt.Fprintf(&b, "%s%s[\"%s\"]\n", indent, id, label)
		}
	}
	for _, id := range g.Resources {
		node("  ", id)
	}
	for _, op := range g.Operators {
		fmt.Fprintf(&b, "  subgraph %s[\"operator %s\"]\n", op.ID, mermaidText([]string{op.Name}))
		for _, id := range op.Views {
			node("    ", id)
		}
		for _, c := range op.Controllers {
			fmt.Fprintf(&b, "    subgraph %s[\"controller %s\"]\n", c.ID, mermaidText([]string{c.Name}))
			for _, id := range c.Stages {
				node("      ", id)
			}
			b.WriteString("    end\n")
		}
		b.WriteString("  end\n")
	}
	for _, e := range g.Edges {
		if e.Label == "" {
			fmt.Fprintf(&b, "  %s --> %s\n", e.From, e.To)
		} else {
			fmt.Fprintf(&b, "  %s -- \"%s\" --> %s\n", e.From, mermaidText([]string{e.Label}), e.To)
		}
	}
	b.WriteString("  classDef resource fill:#e8f1fb,stroke:#3b73b9\n")
	b.WriteString("  classDef view fill:#fdf3e1,stroke:#c98a1b\n")
	b.WriteString("  classDef stage fill:#ffffff,stroke:#555555\n")
	if len(g.ids(Stream)) > 0 {
		b.WriteString("  classDef stream fill:#eef7ee,stroke:#3c8a3c\n")
	}
	for _, kind := range []struct {
		k     NodeKind
		class string
	}{{Resource, "resource"}, {View, "view"}, {Stage, "stage"}, {Stream, "stream"}} {
		if ids := g.ids(kind.k); len(ids) > 0 {
			fmt.Fprintf(&b, "  class %s %s\n", strings.Join(ids, ","), kind.class)
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func (g *Graph) ids(k NodeKind) []string {
	var out []string
	for id, n := range g.Nodes {
		if n.Kind == k {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// mermaidText joins lines with <br/> and escapes what Mermaid's quoted
// labels cannot hold.
func mermaidText(lines []string) string {
	r := strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;")
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = r.Replace(l)
	}
	return strings.Join(esc, "<br/>")
}

// Dot writes the graph in Graphviz's DOT language (left to right):
// operators and controllers are clusters.
func (g *Graph) Dot(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("digraph dcontroller {\n")
	b.WriteString("  rankdir=LR;\n  fontname=\"Helvetica\";\n")
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=11];\n  edge [fontname=\"Helvetica\", fontsize=10];\n")
	node := func(indent, id string) {
		n := g.Nodes[id]
		label := dotText(n.Label)
		switch n.Kind {
		case Resource:
			fmt.Fprintf(&b, "%s%s [label=\"%s\", shape=box, style=\"rounded,filled\", fillcolor=\"#e8f1fb\", color=\"#3b73b9\"];\n", indent, id, label)
		case View:
			fmt.Fprintf(&b, "%s%s [label=\"%s\", shape=cylinder, style=filled, fillcolor=\"#fdf3e1\", color=\"#c98a1b\"];\n", indent, id, label)
		case Stream:
			fmt.Fprintf(&b, "%s%s [label=\"%s\", shape=parallelogram, style=filled, fillcolor=\"#eef7ee\", color=\"#3c8a3c\"];\n", indent, id, label)
		default:
			fmt.Fprintf(&b, "%s%s [label=\"%s\", shape=box, color=\"#555555\"];\n", indent, id, label)
		}
	}
	for _, id := range g.Resources {
		node("  ", id)
	}
	for _, op := range g.Operators {
		fmt.Fprintf(&b, "  subgraph cluster_%s {\n    label=\"operator %s\";\n    style=dashed;\n", op.ID, dotText([]string{op.Name}))
		for _, id := range op.Views {
			node("    ", id)
		}
		for _, c := range op.Controllers {
			fmt.Fprintf(&b, "    subgraph cluster_%s {\n      label=\"controller %s\";\n      style=rounded;\n", c.ID, dotText([]string{c.Name}))
			for _, id := range c.Stages {
				node("      ", id)
			}
			b.WriteString("    }\n")
		}
		b.WriteString("  }\n")
	}
	for _, e := range g.Edges {
		if e.Label == "" {
			fmt.Fprintf(&b, "  %s -> %s;\n", e.From, e.To)
		} else {
			fmt.Fprintf(&b, "  %s -> %s [label=\"%s\"];\n", e.From, e.To, dotText([]string{e.Label}))
		}
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// dotText joins lines with DOT's centred line break and escapes quotes and
// backslashes.
func dotText(lines []string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	esc := make([]string, len(lines))
	for i, l := range lines {
		esc[i] = r.Replace(l)
	}
	return strings.Join(esc, `\n`)
}

// ErrNoGraphviz is returned by SVG when Graphviz's dot is not installed.
var ErrNoGraphviz = errors.New(`svg output needs Graphviz's "dot" command, which is not installed ` +
	`(Debian/Ubuntu: apt-get install graphviz; Fedora: dnf install graphviz; macOS: brew install graphviz); ` +
	`or use --format mermaid or --format dot`)

// DotCommand is the Graphviz command SVG runs; tests may point it elsewhere.
var DotCommand = "dot"

// SVG renders the graph as SVG with Graphviz's dot. It returns
// ErrNoGraphviz when dot is not on the PATH.
func (g *Graph) SVG(ctx context.Context) ([]byte, error) {
	path, err := exec.LookPath(DotCommand)
	if err != nil {
		return nil, ErrNoGraphviz
	}
	var in, out, errb bytes.Buffer
	if err := g.Dot(&in); err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, path, "-Tsvg")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("dot -Tsvg: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}
