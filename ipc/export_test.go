package ipc

// ToolParams returns the parameter names of tool in schema order; ok is
// false for an unknown tool. Grant rules may narrow a tool only by these.
func ToolParams(tool string) (names []string, ok bool) {
	spec, ok := specs[tool]
	if !ok {
		return nil, false
	}
	for _, p := range spec.params {
		names = append(names, p.name)
	}
	return names, true
}

// SocketPath returns the path the server listens on.
func (s *Server) SocketPath() string { return s.cfg.SocketPath }
