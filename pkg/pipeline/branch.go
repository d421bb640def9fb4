package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dcontroller/dcontroller/pkg/expression"
)

// isBranchForm reports whether a pipeline list is in branch form: some
// element is itself a list (compileBranches refuses a list that mixes
// branches and stages).
func isBranchForm(l []any) bool {
	for _, e := range l {
		if _, ok := e.([]any); ok {
			return true
		}
	}
	return false
}

// hasDirective reports whether a plain list of stages starts with @inputs
// or ends with @output: it is then one branch (see Compile). A directive
// elsewhere is refused by compileChain.
func hasDirective(l []any) bool {
	if len(l) == 0 {
		return false
	}
	first, _ := l[0].(map[string]any)
	last, _ := l[len(l)-1].(map[string]any)
	_, in := first[opInputs]
	_, out := last[opOutput]
	return in && len(first) == 1 || out && len(last) == 1
}

// branchSpec is a branch as written, before its stages are compiled.
type branchSpec struct {
	index  int
	path   string   // e.g. spec.controllers[0].pipeline[1]
	inputs []string // @inputs
	inPath []string // the path of each input, e.g. pipeline[1][0]["@inputs"][0]
	output string
	// outPath is the path of the @output stage, e.g. pipeline[1][3].
	outPath string
	specs   []any    // the stages between @inputs and @output
	paths   []string // their paths
}

// compileBranches compiles the branch form of a pipeline into p.branches.
// Each element of list is a branch, a list of stages
//
//	[{"@inputs": [name, ...]}, stage, ..., {"@output": name}]
//
// (implicit: list is the pipeline written as a plain list of stages, one
// branch whose @inputs defaults to all the sources and @output to the only
// output). The rules, each broken one an
// *expression.Error at the path of the offending element
// (pipeline[i][j]...):
//
//   - @inputs is the first stage of a branch and @output its last; neither
//     appears elsewhere. @inputs is a non-empty list of distinct names,
//     @output a name.
//   - An input names a source kind (sources take precedence) or the output
//     of some branch (a stream). A branch with several inputs starts with
//     @join, whose compound document is keyed by the input names, as over
//     several sources; several inputs without @join are refused, as
//     Δ-controller's successor refuses them (no implicit union).
//   - An @output names an output (Options.Outputs: a controller's targets)
//     or a stream that some branch reads; an @output naming a source kind
//     that is not an output could never be read and is refused.
//   - Branches that write the same name are unioned by Z-set addition (bag
//     semantics, as in the successor): follow with @distinct for a set.
//   - The branches that read a stream run after all that write it; a cycle
//     is refused, naming it.
//   - Every output is written by some branch: a target no branch writes is
//     refused (as the successor refuses an unbound output), since it is
//     more likely a misspelt @output than a wish to write nothing.
func (p *Pipeline) compileBranches(list []any, implicit bool) error {
	specs := make([]*branchSpec, 0, len(list))
	if implicit {
		list = []any{list}
	}
	for i, e := range list {
		var bs *branchSpec
		var err error
		if implicit {
			bs, err = p.parseBranch(0, p.opts.Path, e.([]any), false)
		} else {
			stages, ok := e.([]any)
			bpath := expression.Index(p.opts.Path, i)
			if !ok {
				return &expression.Error{Path: bpath, Err: fmt.Errorf(
					"a pipeline in branch form is a list of branches, each a list of stages [{\"%s\": [...]}, ..., {\"%s\": name}]; this element is %s, not a branch",
					opInputs, opOutput, describeShape(e))}
			}
			bs, err = p.parseBranch(i, bpath, stages, true)
		}
		if err != nil {
			return err
		}
		specs = append(specs, bs)
	}

	// Who writes and who reads every stream.
	writers := map[string][]int{}
	for _, bs := range specs {
		writers[bs.output] = append(writers[bs.output], bs.index)
	}
	read := map[string]bool{}
	for _, bs := range specs {
		for k, name := range bs.inputs {
			if slices.Contains(p.sources, name) {
				continue
			}
			if len(writers[name]) == 0 {
				return &expression.Error{Path: bs.inPath[k], Err: fmt.Errorf(
					"%q is neither a source kind (%s) nor the @output of a branch", name, strings.Join(p.sources, ", "))}
			}
			read[name] = true
		}
	}
	for _, bs := range specs {
		if slices.Contains(p.opts.Outputs, bs.output) || read[bs.output] {
			continue
		}
		path := expression.Field(bs.outPath, opOutput)
		if slices.Contains(p.sources, bs.output) {
			return &expression.Error{Path: path, Err: fmt.Errorf(
				"%q is a source kind and not a target (targets: %s): @inputs naming it reads the source, so nothing reads this stream; give it another name",
				bs.output, outputList(p.opts.Outputs))}
		}
		return &expression.Error{Path: path, Err: fmt.Errorf(
			"%q is neither a target (targets: %s) nor read by the @inputs of any branch", bs.output, outputList(p.opts.Outputs))}
	}
	for _, o := range p.opts.Outputs {
		if len(writers[o]) == 0 {
			return &expression.Error{Path: p.opts.Path, Err: fmt.Errorf(
				"no branch writes the target %q: end a branch with {\"%s\": %q}", o, opOutput, o)}
		}
	}

	order, err := branchOrder(specs, writers, p.sources)
	if err != nil {
		return err
	}
	for _, i := range order {
		bs := specs[i]
		b := &branch{path: bs.path, inputs: bs.inputs, output: bs.output}
		if bs.outPath != "" {
			b.outLabel = expression.Field(bs.outPath, opOutput)
		}
		for _, name := range bs.inputs {
			b.source = append(b.source, slices.Contains(p.sources, name))
		}
		if err := p.compileChain(b, bs.specs, bs.paths, "inputs", "a branch"); err != nil {
			return err
		}
		if len(b.inputs) > 1 && b.join == nil {
			return &expression.Error{Path: bs.path, Err: fmt.Errorf(
				"a branch over several inputs (%s) must start with @join after @inputs", strings.Join(b.inputs, ", "))}
		}
		p.branches = append(p.branches, b)
	}
	return nil
}

func outputList(outs []string) string {
	if len(outs) == 0 {
		return "none"
	}
	return strings.Join(outs, ", ")
}

// parseBranch splits branch i at path into its directives and stages.
// explicit: the branch must have
// @inputs and @output (else they default to the sources and the only
// output).
func (p *Pipeline) parseBranch(i int, path string, stages []any, explicit bool) (*branchSpec, error) {
	index := expression.Index
	bs := &branchSpec{index: i, path: path}
	if len(stages) == 0 {
		return nil, &expression.Error{Path: path, Err: fmt.Errorf(
			"an empty branch; a branch is [{\"%s\": [name, ...]}, stage, ..., {\"%s\": name}]", opInputs, opOutput)}
	}
	names := make([]string, len(stages))
	for j, st := range stages {
		name, _, err := stageOf(st, index(path, j))
		if err != nil {
			return nil, err
		}
		names[j] = name
	}
	for j, name := range names {
		if name == opInputs && j > 0 || name == opOutput && j < len(names)-1 {
			return nil, &expression.Error{Path: index(path, j), Err: fmt.Errorf("%s must be the %s stage of a branch",
				name, map[string]string{opInputs: "first", opOutput: "last"}[name])}
		}
	}
	first, last := 0, len(stages)
	if names[0] == opInputs {
		first = 1
		ipath := expression.Field(index(path, 0), opInputs)
		l, ok := stages[0].(map[string]any)[opInputs].([]any)
		if !ok || len(l) == 0 {
			return nil, &expression.Error{Path: ipath, Err: fmt.Errorf(
				"%s takes a non-empty list of names (source kinds or the @output of other branches), got %s", opInputs, describeShape(stages[0].(map[string]any)[opInputs]))}
		}
		for k, e := range l {
			name, ok := e.(string)
			kpath := expression.Index(ipath, k)
			switch {
			case !ok:
				return nil, &expression.Error{Path: kpath, Err: fmt.Errorf("an input is a non-empty name, got %s", describeShape(e))}
			case name == "":
				return nil, &expression.Error{Path: kpath, Err: errors.New("an input is a non-empty name, got an empty string")}
			case slices.Contains(bs.inputs, name):
				return nil, &expression.Error{Path: kpath, Err: fmt.Errorf("duplicate input %q", name)}
			}
			bs.inputs = append(bs.inputs, name)
			bs.inPath = append(bs.inPath, kpath)
		}
	} else if explicit {
		return nil, &expression.Error{Path: index(path, 0), Err: fmt.Errorf(
			"a branch must start with {\"%s\": [name, ...]}, got %q", opInputs, names[0])}
	} else {
		bs.inputs = slices.Clone(p.sources)
		for range p.sources {
			bs.inPath = append(bs.inPath, path)
		}
	}
	if n := len(stages) - 1; names[n] == opOutput && n >= first {
		last = n
		bs.outPath = index(path, n)
		opath := expression.Field(bs.outPath, opOutput)
		name, ok := stages[n].(map[string]any)[opOutput].(string)
		if !ok {
			return nil, &expression.Error{Path: opath, Err: fmt.Errorf(
				"%s takes a name (a target or a stream read by other branches), got %s", opOutput, describeShape(stages[n].(map[string]any)[opOutput]))}
		}
		if name == "" {
			return nil, &expression.Error{Path: opath, Err: fmt.Errorf(
				"%s takes a name (a target or a stream read by other branches), got an empty string", opOutput)}
		}
		bs.output = name
	} else if explicit {
		return nil, &expression.Error{Path: index(path, n), Err: fmt.Errorf(
			"a branch must end with {\"%s\": name}, got %q", opOutput, names[n])}
	} else {
		if len(p.opts.Outputs) > 1 {
			return nil, &expression.Error{Path: path, Err: fmt.Errorf(
				"a pipeline writing several targets (%s) must end each branch with {\"%s\": <target>}", strings.Join(p.opts.Outputs, ", "), opOutput)}
		}
		bs.output = p.outputs[0]
	}
	for j := first; j < last; j++ {
		bs.specs = append(bs.specs, stages[j])
		bs.paths = append(bs.paths, index(path, j))
	}
	return bs, nil
}

// branchOrder returns the indexes of the branches in an order in which
// every branch comes after all the writers of the streams it reads (among
// those, lowest index first), or an *expression.Error naming a cycle.
func branchOrder(specs []*branchSpec, writers map[string][]int, sources []string) ([]int, error) {
	// after[i]: the branches that read what i writes.
	after := make([][]int, len(specs))
	pending := make([]int, len(specs)) // writers not yet placed
	for _, bs := range specs {
		for _, name := range bs.inputs {
			if slices.Contains(sources, name) {
				continue
			}
			for _, w := range writers[name] {
				after[w] = append(after[w], bs.index)
				pending[bs.index]++
			}
		}
	}
	var order, ready []int
	for i := range specs {
		if pending[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, j := range after[i] {
			if pending[j]--; pending[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if len(order) == len(specs) {
		return order, nil
	}
	// Walk back from a branch left over along the writers of its inputs,
	// which are all left over too: a node repeats, closing a cycle.
	var left int
	for i := range specs {
		if pending[i] > 0 {
			left = i
			break
		}
	}
	seen := map[int]int{} // branch -> position in walk
	var walk []int
	for i := left; ; {
		if at, ok := seen[i]; ok {
			walk = walk[at:]
			break
		}
		seen[i] = len(walk)
		walk = append(walk, i)
		next := -1
		for _, name := range specs[i].inputs {
			if slices.Contains(sources, name) {
				continue
			}
			for _, w := range writers[name] {
				if pending[w] > 0 {
					next = w
					break
				}
			}
			if next >= 0 {
				break
			}
		}
		i = next
	}
	// walk follows reads backwards; the cycle in data order is reversed,
	// and told from its lowest branch.
	slices.Reverse(walk)
	low := slices.Index(walk, slices.Min(walk))
	walk = append(walk[low:], walk[:low]...)
	parts := make([]string, 0, len(walk)+1)
	for _, i := range append(walk, walk[0]) {
		parts = append(parts, fmt.Sprintf("%s (@output %q)", lastIndex(specs[i].path), specs[i].output))
	}
	return nil, &expression.Error{Path: specs[walk[0]].path, Err: errors.New(
		"the branches form a cycle, each reading the @output of the one before: " + strings.Join(parts, " -> "))}
}

// lastIndex is the last element of a spec path, e.g. "[1]" of
// "spec.controllers[0].pipeline[1]".
func lastIndex(path string) string {
	if i := strings.LastIndex(path, "["); i >= 0 {
		return path[i:]
	}
	return path
}
