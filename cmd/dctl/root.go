package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
	// quiet: Execute prints nothing (the command's output says it all).
	quiet bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCommand(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "dctl",
		Short: "dcontroller: Kubernetes controllers written as data",
		Long: `dctl runs and inspects dcontroller operators: declarative Kubernetes
controllers whose logic is a pipeline over the objects they watch.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newEvalCommand())
	root.AddCommand(newDiffCommand())
	root.AddCommand(newStartCommand())
	root.AddCommand(newRunCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newVersionCommand())
	root.AddCommand(newGenerateKeysCommand())
	root.AddCommand(newGenerateConfigCommand())
	root.AddCommand(newGetConfigCommand())
	root.AddCommand(newRBACCommand())
	root.AddCommand(newVisualizeCommand())
	root.AddCommand(newTestCommand())
	return root
}

// goStyleFlags rewrites the single-dash long flags of args ("-workers=3",
// "-zap-log-level", as Go's flag package, which Metacontroller parses its
// command line with, accepts them) to the double-dash form cmd parses. Only
// names of cmd's long flags are rewritten; one-letter shorthands ("-v=4")
// and everything after "--" stay as they are.
func goStyleFlags(cmd *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if len(name) > 1 && cmd.Flags().Lookup(name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// Execute runs dctl with args and returns the process exit code: 0 on
// success, 1 on a usage or input error, 2 when the work ran but reported errors.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	if len(args) > 0 && (args[0] == "start" || args[0] == "test") {
		// dctl test takes -run as go test does.
		if start, _, err := root.Find(args[:1]); err == nil {
			args = append(args[:1:1], goStyleFlags(start, args[1:])...)
		}
	}
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if !ee.quiet {
				fmt.Fprintf(stderr, "Error: %v\n", err)
			}
			return ee.code
		}
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}
