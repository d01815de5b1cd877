package tfpb

// Regenerate the .pb.go files with protoc and the plugin versions pinned in go.mod.
//go:generate ./gen.sh
