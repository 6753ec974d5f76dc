// Package docs holds the tests that keep the repository's documents in step
// with its code: the packages table of docs/architecture.md, the metrics
// list of docs/operations.md, the fuzz targets `make fuzz` runs and
// docs/reliability.md lists, and the binaries .gitignore must cover. Each
// list is read from the code, so a package, metric, fuzz target or command
// added without its line in the docs fails here. It has no code of its own.
package docs
