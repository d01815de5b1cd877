// Package deploy holds what runs starwire outside a developer's machine:
// the container image (Dockerfile) and Kubernetes manifests
// (kubernetes/starwire.yaml, printed by "starwire cluster manifests"). It
// is a module of its own so that its tests' Kubernetes dependencies stay
// out of starwire's; its tests decode every manifest with the Kubernetes
// API types and check the cluster spec and endpoint map the tasks compute
// agree with the Services.
package deploy
