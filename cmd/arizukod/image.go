package main

import (
	"context"
	"fmt"

	"github.com/arizuko/arizukod/runtime"
)

func cmdImage(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "import-static" {
		fmt.Println("usage: arizukod image import-static --tag REF BINARY\n\nMakes image REF on the engine from one static binary, which becomes its entrypoint.")
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	fs := newFlags("image import-static", "--tag REF BINARY")
	var ef engineFlags
	tag := fs.String("tag", "localhost/arizuko-agent:latest", "image reference to create")
	ef.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return errUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errUsage
	}
	eng, info, err := ef.open(ctx)
	if err != nil {
		return err
	}
	if err := runtime.ImportStatic(ctx, eng, *tag, fs.Arg(0)); err != nil {
		return err
	}
	fmt.Printf("imported %s into %s %s at %s\n", *tag, info.Name, info.Version, info.Socket)
	return nil
}
