package repository

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Size limits of what is read from a source.
const (
	MaxIndexBytes   = 4 << 20
	MaxTagsBytes    = 1 << 20
	MaxArchiveBytes = 20 << 20
)

// IndexName is the repository index on every source.
const IndexName = "index.json"

// Entry is one plugin of the repository index.
type Entry struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Icon        string `json:"icon"`
	Verified    bool   `json:"verified"`
	Maintainer  string `json:"maintainer"`
	Type        string `json:"type"`
}

// Index reads the repository index: a JSON array of entries. Entries
// without a name or url are dropped.
func Index(ctx context.Context, src Source) ([]Entry, error) {
	data, err := src.Fetch(ctx, IndexName, MaxIndexBytes)
	if errors.Is(err, ErrNotExist) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, err
	}
	var all []Entry
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("repository: %s on %s: %w", IndexName, src, err)
	}
	out := make([]Entry, 0, len(all))
	for _, e := range all {
		if e.Name != "" && e.URL != "" {
			out = append(out, e)
		}
	}
	return out, nil
}

// Latest returns the newest tag of a plugin: the first valid entry of its
// tags.json (a JSON array of strings, newest first).
func Latest(ctx context.Context, src Source, ref Ref) (string, error) {
	data, err := src.Fetch(ctx, ref.TagsName(), MaxTagsBytes)
	if err != nil {
		return "", err
	}
	var tags []string
	if err := json.Unmarshal(data, &tags); err != nil {
		return "", fmt.Errorf("repository: %s: %w", ref.TagsName(), err)
	}
	for _, t := range tags {
		if ValidTag(t) {
			return t, nil
		}
	}
	return "", fmt.Errorf("%w: %s lists no usable tag", ErrNotExist, ref.TagsName())
}

// Archive returns the archive of a plugin at tag: "<dir>/<tag>.tar.gz",
// else "<dir>/<tag>.zip" (each at most MaxArchiveBytes).
func Archive(ctx context.Context, src Source, ref Ref, tag string) ([]byte, error) {
	if !ValidTag(tag) {
		return nil, ErrNotExist
	}
	name := ref.ArchiveName(tag)
	data, err := src.Fetch(ctx, name+".tar.gz", MaxArchiveBytes)
	if errors.Is(err, ErrNotExist) {
		data, err = src.Fetch(ctx, name+".zip", MaxArchiveBytes)
	}
	return data, err
}
