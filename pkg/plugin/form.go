package plugin

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A plugin config can be written as multipart/form-data, as PostHog's
// frontend does to upload attachments: the config's values are the JSON
// text of a `config` field; enabled, order, plugin, name and description
// are plain form values; each file part add_attachment[KEY] adds or
// replaces KEY's attachment and each field remove_attachment[KEY]
// (whatever its value) removes it.

// Form limits: parts, and a text field's bytes (the fields' own limits
// apply after).
const (
	maxFormParts    = 64
	maxFormFieldLen = maxConfigLen
	maxContentType  = 255
)

const (
	formFieldsKnown  = "plugin, enabled, order, config, name, description, add_attachment[KEY] files and remove_attachment[KEY] fields"
	attachmentPrefix = "add_attachment["
	removePrefix     = "remove_attachment["
)

// bracketKey returns KEY of prefix+KEY+"]": 1 to maxConfigKeyLen
// characters, no ']'.
func bracketKey(name, prefix string) (string, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, "]") {
		return "", false
	}
	key := name[len(prefix) : len(name)-1]
	if key == "" || len(key) > maxConfigKeyLen || strings.Contains(key, "]") {
		return "", false
	}
	return key, true
}

// DecodeConfigForm reads a plugin config create or PATCH body sent as
// multipart/form-data with the given boundary. Its fields are checked as
// the same fields of a JSON body are (DecodeConfigInput); a field the form
// does not take, a field given twice, a file where a value belongs (or the
// reverse) and a body that is not well-formed multipart are refused.
func DecodeConfigForm(body io.Reader, boundary string) (ConfigInput, error) {
	if boundary == "" {
		return ConfigInput{}, invalid("body", "A multipart/form-data body needs a boundary in its Content-Type.")
	}
	mr := multipart.NewReader(body, boundary)
	fields := map[string]json.RawMessage{}
	seen := map[string]bool{}
	var uploads []AttachmentUpload
	var removals []string
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return ConfigInput{}, malformed(err)
		}
		if n == maxFormParts {
			return ConfigInput{}, invalid("body", "A plugin config form has at most %d parts.", maxFormParts)
		}
		name := part.FormName()
		if name == "" {
			return ConfigInput{}, invalid("body", "Every part of the form needs a Content-Disposition with a name.")
		}
		if seen[name] {
			return ConfigInput{}, invalid(name, "The form holds %q more than once.", name)
		}
		seen[name] = true
		_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
		fileName, isFile := params["filename"]
		if key, ok := bracketKey(name, attachmentPrefix); ok {
			if !isFile {
				return ConfigInput{}, invalid(name, "%s must be a file (a part with a filename).", name)
			}
			if fileName == "" {
				continue // an empty file input, which browsers send and PostHog skips
			}
			u, err := readUpload(part, name, key, fileName)
			if err != nil {
				return ConfigInput{}, err
			}
			uploads = append(uploads, u)
			continue
		}
		if isFile {
			return ConfigInput{}, invalid(name, "Unexpected file %q: a plugin config form takes %s.", name, formFieldsKnown)
		}
		value, err := readField(part, name)
		if err != nil {
			return ConfigInput{}, err
		}
		if key, ok := bracketKey(name, removePrefix); ok {
			removals = append(removals, key)
			continue
		}
		raw, err := formValue(name, value)
		if err != nil {
			return ConfigInput{}, err
		}
		fields[name] = raw
	}
	for _, u := range uploads {
		for _, k := range removals {
			if u.Key == k {
				return ConfigInput{}, invalid(addAttachmentField(k), "The form both adds and removes attachment %q.", k)
			}
		}
	}
	body2, err := json.Marshal(fields)
	if err != nil {
		return ConfigInput{}, err
	}
	in, err := DecodeConfigInput(body2)
	if err != nil {
		return in, err
	}
	in.AddAttachments, in.RemoveAttachments = uploads, removals
	return in, nil
}

// malformed is the refusal of a body the multipart reader cannot read.
func malformed(err error) error {
	return &Error{Kind: KindInvalid, Attr: "body", Detail: "The multipart/form-data body is malformed: " + err.Error() + ".", Err: err}
}

func readField(part *multipart.Part, name string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(part, maxFormFieldLen+1))
	if err != nil {
		return "", malformed(err)
	}
	if len(data) > maxFormFieldLen {
		return "", invalid(name, "A form value is at most %d KiB.", maxFormFieldLen>>10)
	}
	if !utf8.Valid(data) {
		return "", invalid(name, "A form value must be UTF-8 text.")
	}
	return string(data), nil
}

func readUpload(part *multipart.Part, name, key, fileName string) (AttachmentUpload, error) {
	// Only the base name, as PostHog keeps it, whichever separator the
	// client's system uses.
	if i := strings.LastIndexAny(fileName, `/\`); i >= 0 {
		fileName = fileName[i+1:]
	}
	if fileName == "" || !utf8.ValidString(fileName) || utf8.RuneCountInString(fileName) > maxAttachmentNameLen {
		return AttachmentUpload{}, invalid(name, "The file name must be UTF-8 text of 1 to %d characters.", maxAttachmentNameLen)
	}
	ct := part.Header.Get("Content-Type")
	if len(ct) > maxContentType || !utf8.ValidString(ct) {
		return AttachmentUpload{}, invalid(name, "The file's Content-Type is at most %d characters.", maxContentType)
	}
	data, err := io.ReadAll(io.LimitReader(part, MaxAttachmentBytes+1))
	if err != nil {
		return AttachmentUpload{}, malformed(err)
	}
	if len(data) > MaxAttachmentBytes {
		return AttachmentUpload{}, invalid(name, "An attachment is at most %d MiB.", MaxAttachmentBytes>>20)
	}
	return AttachmentUpload{Key: key, ContentType: ct, FileName: fileName, Contents: data}, nil
}

// formValue turns a form value into the JSON of the same field of a JSON
// body. Booleans and integers are read as Django REST framework reads
// form values (enabled=true, True, 1, on, yes...).
func formValue(name, v string) (json.RawMessage, error) {
	switch name {
	case "config":
		if !json.Valid([]byte(v)) {
			return nil, invalid("config", "Must be the JSON text of an object.")
		}
		return json.RawMessage(v), nil
	case "enabled":
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "t", "yes", "y", "on", "1":
			return json.RawMessage("true"), nil
		case "false", "f", "no", "n", "off", "0":
			return json.RawMessage("false"), nil
		}
		return nil, invalid("enabled", "Must be a valid boolean.")
	case "order", "plugin":
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return nil, invalid(name, "A valid integer is required.")
		}
		return json.RawMessage(strconv.FormatInt(n, 10)), nil
	case "name", "description":
		return json.Marshal(v)
	}
	return nil, invalid(name, "Unknown form field %q: a plugin config form takes %s.", name, formFieldsKnown)
}

// FormBoundary returns the boundary of a multipart/form-data Content-Type
// ("" when it names none or cannot be read: DecodeConfigForm refuses
// that), and whether the type is multipart/form-data at all.
func FormBoundary(contentType string) (boundary string, ok bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		head, _, _ := strings.Cut(contentType, ";")
		return "", strings.EqualFold(strings.TrimSpace(head), "multipart/form-data")
	}
	return params["boundary"], mt == "multipart/form-data"
}
