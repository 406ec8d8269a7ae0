// Package deploytest checks the deployment files against the code they
// deploy, without a Docker engine or a Kubernetes cluster: docker-compose.yml,
// .env.example, the Dockerfiles and .dockerignore under deploy/docker, the
// manifests under deploy/k8s, and scripts/run-local.sh.
//
// The facts come from the code itself: the variables each binary reads are
// recorded while its own LoadConfig runs, routes are matched against the
// binaries' own routers, and every value a file sets is loaded through the
// binary's configuration code, so a file that drifts from the code fails here
// and not at a user's first `docker compose up`. It holds only tests.
package deploytest
