// Package domain bundles the domain services that both transports serve, so
// that the REST and the gRPC server are built from the same values.
package domain

import (
	"github.com/wirelens/wirelens/internal/catalog"
	"github.com/wirelens/wirelens/internal/echo"
	"github.com/wirelens/wirelens/internal/hello"
	"github.com/wirelens/wirelens/internal/mathsvc"
	"github.com/wirelens/wirelens/internal/people"
)

// Services holds one instance of every domain service.
type Services struct {
	Hello   *hello.Service
	Math    *mathsvc.Service
	People  *people.Service
	Catalog *catalog.Catalog
	Echo    *echo.Service
}

// New returns every domain service; it generates the catalog (about 0.1 s).
func New() *Services {
	return &Services{
		Hello:   hello.New(),
		Math:    mathsvc.New(),
		People:  people.New(),
		Catalog: catalog.New(),
		Echo:    echo.New(),
	}
}
