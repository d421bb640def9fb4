// Package visualize draws the dataflow of dcontroller operators: the kinds
// the controllers watch (native resources and views), each controller with
// its pipeline stages in order, and the kinds they write with the target
// type on the edge. A pipeline in branch form shows each branch as a chain
// of its stages from its @inputs (source kinds, or the stream nodes that
// other branches write) to its @output (a stream node, or the target of
// that name). A view that one controller writes and another watches is
// one node, so chained controllers show as a chain.
//
// Build turns operators into a Graph; Mermaid and Dot render it as a
// Mermaid flowchart or a Graphviz digraph, and SVG runs Graphviz's dot on
// the latter.
package visualize
