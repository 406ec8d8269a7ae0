// Package layers holds the rule table of which dfs packages may depend on
// which, and the test that checks the module's import graph against it, so
// that `make test` fails on an import that runs back up the layers. It has
// no code that other packages use.
package layers
