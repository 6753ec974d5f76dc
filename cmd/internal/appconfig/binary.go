package appconfig

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// Command is a subcommand of a binary.
type Command struct {
	Name string
	Run  func(args []string) error
}

// Main runs the subcommand named by the first argument (the first command
// when the first argument is a flag or absent) and exits with status 1 on
// error.
func Main(binary string, commands ...Command) {
	args := os.Args[1:]
	name := commands[0].Name
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	err := fmt.Errorf("unknown command %q: want %s", name, names(commands))
	for _, c := range commands {
		if c.Name == name {
			err = c.Run(args)
		}
	}
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", binary, err)
		os.Exit(1)
	}
}

func names(commands []Command) string {
	var out []string
	for _, c := range commands {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}
