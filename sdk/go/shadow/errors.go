package shadow

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The error classes, the same names as the Rust crate, the Parquet data and the metrics use.
const (
	ClassConflict      = "conflict"
	ClassAlreadyExists = "already-exists"
	ClassNotFound      = "not-found"
	ClassForbidden     = "forbidden"
	ClassInvalid       = "invalid"
	ClassThrottled     = "throttled"
	ClassServer        = "server"
	ClassTransport     = "transport"
	ClassTimeout       = "timeout"
	ClassPrecondition  = "precondition"
	ClassInternal      = "internal"
)

// Error is an operation's failure with an explicit class. Operations return it for failures
// that are not API errors (a missing precondition, an input that cannot be parsed); API errors
// are classified from their status.
type Error struct {
	Class string
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf is an operation failure of a class.
func Errorf(class, format string, args ...any) error {
	return &Error{Class: class, Err: fmt.Errorf(format, args...)}
}

// Precondition is the failure of an operation that cannot run because an earlier one did not
// produce what it needs.
func Precondition(format string, args ...any) error {
	return Errorf(ClassPrecondition, format, args...)
}

// ClassOfStatus maps an HTTP status code and a Kubernetes reason to a class, as the Rust engine
// does.
func ClassOfStatus(code int32, reason string) string {
	switch {
	case code == 409 && reason == "AlreadyExists":
		return ClassAlreadyExists
	case code == 409 || code == 410:
		return ClassConflict
	case code == 404:
		return ClassNotFound
	case code == 401 || code == 403:
		return ClassForbidden
	case code == 429:
		return ClassThrottled
	case code == 408 || code == 504:
		return ClassTimeout
	case code >= 500 && code <= 599 && reason == "Timeout":
		return ClassTimeout
	case code >= 500 && code <= 599:
		return ClassServer
	default:
		return ClassInvalid
	}
}

// Classify gives an operation's error its class: an explicit [Error] class, an API status, a
// timeout, a transport failure, else internal.
func Classify(err error) string {
	var explicit *Error
	if errors.As(err, &explicit) {
		return explicit.Class
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		s := status.Status()
		return ClassOfStatus(s.Code, string(s.Reason))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return ClassTimeout
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		if netErr.Timeout() {
			return ClassTimeout
		}
		return ClassTransport
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return ClassTransport
	}
	return ClassInternal
}

// IsConflict says whether err is a 409 Conflict (not AlreadyExists): what retry-on-conflict
// retries.
func IsConflict(err error) bool { return err != nil && apierrors.IsConflict(err) }
