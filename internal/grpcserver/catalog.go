package grpcserver

import (
	"context"

	"github.com/wirelens/wirelens/internal/apierr"
	"github.com/wirelens/wirelens/internal/catalog"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// CatalogServer implements wirelensv1.CatalogServer on top of the domain logic.
type CatalogServer struct {
	wirelensv1.UnimplementedCatalogServer
	c *catalog.Catalog
}

var _ wirelensv1.CatalogServer = (*CatalogServer)(nil)

// NewCatalogServer returns the gRPC implementation of Catalog.
func NewCatalogServer(c *catalog.Catalog) *CatalogServer {
	return &CatalogServer{c: c}
}

// GetProduct implements wirelens.v1.Catalog/GetProduct. The answer is the
// catalog's shared product, which grpc-go only reads.
func (s *CatalogServer) GetProduct(ctx context.Context, req *wirelensv1.GetProductRequest) (*wirelensv1.Product, error) {
	p, err := s.c.Get(ctx, req.GetId())
	if err != nil {
		return nil, apierr.Status("catalog", err)
	}
	return p, nil
}

// ListProducts implements wirelens.v1.Catalog/ListProducts.
func (s *CatalogServer) ListProducts(ctx context.Context, req *wirelensv1.ListProductsRequest) (*wirelensv1.ListProductsReply, error) {
	l, err := s.c.List(ctx, req.GetCount())
	if err != nil {
		return nil, apierr.Status("catalog", err)
	}
	return &wirelensv1.ListProductsReply{Products: l}, nil
}
