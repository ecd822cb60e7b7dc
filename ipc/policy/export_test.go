package policy

// CompileGlob compiles pattern as a glob of anything but folders. The error
// names the column of the problem.
func CompileGlob(pattern string) (Glob, error) {
	return compileGlobError(pattern, false)
}

// CompileFolderGlob compiles pattern as a folder glob, where '*' stays within
// one segment and "**" crosses '/'. The error names the column of the
// problem.
func CompileFolderGlob(pattern string) (Glob, error) {
	return compileGlobError(pattern, true)
}

func compileGlobError(pattern string, folder bool) (Glob, error) {
	g, err := compileGlob(pattern, folder)
	if err != nil {
		return Glob{}, &SyntaxError{What: "glob", Input: pattern, Column: column(pattern, err.off), Msg: err.msg}
	}
	return g, nil
}
