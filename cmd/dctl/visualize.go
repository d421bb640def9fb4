package main

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	opv1a1 "github.com/dcontroller/dcontroller/api/operator/v1alpha1"
	"github.com/dcontroller/dcontroller/pkg/visualize"
)

type visualizeOptions struct {
	files  []string
	format string
	output string
}

func newVisualizeCommand() *cobra.Command {
	o := &visualizeOptions{}
	cmd := &cobra.Command{
		Use:   "visualize -f OPERATOR.yaml [-f ...] [--format mermaid|dot|svg] [--output FILE]",
		Short: "Draw the dataflow of operators: sources, views, pipeline stages, targets",
		Long: `visualize draws the dataflow of the given operators: the kinds the
controllers watch (native resources and views), each controller with its
pipeline stages in order, and the kinds they write, with the target type
(Updater, Patcher, Applier) on the arrow. A view that one controller writes
and another watches is one box, so chained controllers show as a chain.

Formats: mermaid (a Mermaid flowchart, which GitHub renders inside a
` + "```mermaid" + ` block), dot (Graphviz), and svg, which runs Graphviz's dot
and so needs it installed (Debian/Ubuntu: apt-get install graphviz).`,
		Example: `  dctl visualize -f examples/unready-pod-report/operator.yaml
  dctl visualize -f op.yaml --format svg --output op.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVisualize(cmd, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "operator file (YAML stream of Operator objects); repeatable")
	cmd.Flags().StringVar(&o.format, "format", "mermaid", "output format: mermaid, dot or svg")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func runVisualize(cmd *cobra.Command, o *visualizeOptions, stdout io.Writer) error {
	switch o.format {
	case "mermaid", "dot", "svg":
	default:
		return fmt.Errorf("--format: unknown format %q (want mermaid, dot or svg)", o.format)
	}
	var ops []*opv1a1.Operator
	for _, f := range o.files {
		loaded, err := readOperatorsAndRGDs(f)
		if err != nil {
			return err
		}
		ops = append(ops, loaded...)
	}
	g, err := visualize.Build(ops)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	switch o.format {
	case "mermaid":
		err = g.Mermaid(&buf)
	case "dot":
		err = g.Dot(&buf)
	case "svg":
		var svg []byte
		if svg, err = g.SVG(contextOf(cmd)); err == nil {
			buf.Write(svg)
		}
	}
	if err != nil {
		return err
	}
	if o.output == "" {
		_, err = stdout.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(o.output, buf.Bytes(), 0o644)
}
