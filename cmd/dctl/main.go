// Command dctl is the dcontroller manager and command-line tool.
package main

import (
	"os"
)

func main() {
	os.Exit(Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
