package handlers

// Regenerate worker_service_starwire.pb.go with protoc and
// protoc-gen-go-starwire.
//go:generate ./gen.sh
