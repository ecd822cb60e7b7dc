package policy

import "strings"

// The group tree is the folder hierarchy: "main/research" is the parent of
// "main/research/w1". These helpers compare names only; validating them is
// the groupfolder package's job, and an empty name is never related to
// anything.

// InSubtree reports whether folder is root itself or one of its descendants.
func InSubtree(root, folder string) bool {
	return root != "" && (folder == root || strings.HasPrefix(folder, root+"/"))
}

// IsChild reports whether child is a direct child of parent (one level down,
// not a grandchild). delegate_to_child may target only such a folder.
func IsChild(parent, child string) bool {
	rest, ok := strings.CutPrefix(child, parent+"/")
	return parent != "" && ok && rest != "" && !strings.Contains(rest, "/")
}

// Parent returns the direct parent of folder; ok is false for a root group.
// delegate_to_parent always targets this folder.
func Parent(folder string) (parent string, ok bool) {
	i := strings.LastIndexByte(folder, '/')
	if i <= 0 {
		return "", false
	}
	return folder[:i], true
}
