//go:build unix

package repository

import "syscall"

// oNonblock makes opening a FIFO for reading return at once.
const oNonblock = syscall.O_NONBLOCK
