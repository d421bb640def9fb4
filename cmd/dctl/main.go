// Command dctl is the dcontroller manager and command-line tool.
package main

import (
	// Before the packages that touch the most of the binary: see its doc.
	_ "github.com/dcontroller/dcontroller/internal/smallpages"

	"os"
	"path/filepath"
)

func main() {
	setFallbackRoots()
	os.Exit(Execute(argsFor(os.Args[0], os.Args[1:]), os.Stdin, os.Stdout, os.Stderr))
}

// argsFor returns dctl's arguments for a process started as argv0 with
// args: invoked under the name "metacontroller" (the command of
// Metacontroller's Deployment, /usr/bin/metacontroller, which the image
// provides as a link to dctl), dctl runs `start` with the arguments as
// they are, so that a Metacontroller manifest needs only its image changed.
func argsFor(argv0 string, args []string) []string {
	if filepath.Base(argv0) == "metacontroller" {
		return append([]string{"start"}, args...)
	}
	return args
}
