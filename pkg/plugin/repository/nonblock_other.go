//go:build !unix

package repository

// oNonblock: elsewhere there is no such flag; ReadFile still refuses what
// is not a regular file once opened.
const oNonblock = 0
