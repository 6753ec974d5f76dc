package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/personhub/personhub/pkg/controlplane"
)

type ctxKey int

const keyCtx ctxKey = 0

// keyFrom returns the authenticated key of a request.
func keyFrom(ctx context.Context) controlplane.Key {
	k, _ := ctx.Value(keyCtx).(controlplane.Key)
	return k
}

// authenticate checks the personal API key, the route's scopes and the
// key's rate limit, in that order, before the handler runs.
func (a *API) authenticate(scopes []string, next http.Handler) http.Handler {
	return a.wrap(func(w http.ResponseWriter, r *http.Request) error {
		header := r.Header.Get("Authorization")
		if header == "" {
			return errNotAuthenticated
		}
		scheme, secret, ok := strings.Cut(header, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
			return errNotAuthenticated
		}
		key, err := a.keys.Authenticate(strings.TrimSpace(secret))
		if err != nil {
			return errBadKey
		}
		for _, s := range scopes {
			if !controlplane.ScopeAllows(key.Scopes, s) {
				return missingScope(s)
			}
		}
		if err := a.limiter.allow(key.ID, time.Now()); err != nil {
			return err
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyCtx, key)))
		return nil
	})
}

// project returns the project named in the path when the key's
// organization owns it. Another organization's project and a missing one
// give the same 404, so keys cannot probe other tenants.
func (a *API) project(r *http.Request) (controlplane.Project, error) {
	id, err := parseID(pathVar(r, "project_id"))
	if err != nil {
		return controlplane.Project{}, errNotFound
	}
	p, ok := a.keys.ProjectByID(id)
	if !ok || p.OrganizationID != keyFrom(r.Context()).OrganizationID {
		return controlplane.Project{}, errNotFound
	}
	return p, nil
}
