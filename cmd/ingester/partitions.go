package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/personhub/personhub/cmd/internal/appconfig"
)

// parsePartitions reads -partition: "all" or a comma-separated list of
// partitions of n.
func parsePartitions(list string, n int) ([]int, error) {
	if list == "all" {
		out := make([]int, n)
		for k := range out {
			out[k] = k
		}
		return out, nil
	}
	var out []int
	for _, s := range appconfig.SplitList(list) {
		k, err := strconv.Atoi(s)
		if err != nil || k < 0 || k >= n {
			return nil, fmt.Errorf("-partition %q: want all or partitions among 0..%d", list, n-1)
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-partition names no partition")
	}
	return out, nil
}
