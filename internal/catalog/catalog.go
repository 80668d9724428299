// Package catalog is the domain logic of the Catalog service (experiment E4):
// 10,000 products of 30 attributes held in memory, generated at start from a
// fixed seed so that every process (and every transport) serves the same
// bytes. The generated wirelens.v1.Product is its data model; the products
// are shared and read-only.
package catalog

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wirelens/wirelens/internal/apierr"
	wirelensv1 "github.com/wirelens/wirelens/services/gen/wirelens/v1"
)

// Size is the number of products; their ids are 1..Size.
const Size = 10_000

// DefaultListCount is what ListProducts answers for count 0.
const DefaultListCount = 100

// Seed is the PCG seed of the generated catalog.
var Seed = [2]uint64{0x77697265, 0x6c656e73} // "wire", "lens"

// Catalog holds the products.
type Catalog struct {
	products []*wirelensv1.Product // products[i].Id == i+1
}

// New returns the catalog of Size products generated from Seed.
func New() *Catalog {
	return &Catalog{products: Generate(Seed, Size)}
}

// Get returns the product with id (1..Size).
func (c *Catalog) Get(ctx context.Context, id int32) (*wirelensv1.Product, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if id < 1 || int(id) > len(c.products) {
		return nil, apierr.NotFound("product %d not found (ids are 1..%d)", id, len(c.products))
	}
	return c.products[id-1], nil
}

// List returns the first count products in id order (1..Size; 0 means
// DefaultListCount). The slice is shared: callers must not modify it.
func (c *Catalog) List(ctx context.Context, count int32) ([]*wirelensv1.Product, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if count == 0 {
		count = DefaultListCount
	}
	if count < 0 || int(count) > len(c.products) {
		return nil, apierr.InvalidArgument("count must be in 0..%d, got %d", len(c.products), count)
	}
	return c.products[:count:count], nil
}

// Generate returns n products with ids 1..n. The values come from the raw
// output of a PCG source (the PCG-DXSM algorithm is fixed), reduced with the
// helpers below, so the catalog does not depend on math/rand's higher-level
// methods, which may change between Go releases.
func Generate(seed [2]uint64, n int) []*wirelensv1.Product {
	g := gen{src: rand.NewPCG(seed[0], seed[1])}
	out := make([]*wirelensv1.Product, n)
	for i := range out {
		out[i] = g.product(int32(i + 1))
	}
	return out
}

type gen struct {
	src *rand.PCG
}

func (g *gen) intn(n int) int { return int(g.src.Uint64() % uint64(n)) }

// between returns an int in lo..hi.
func (g *gen) between(lo, hi int) int { return lo + g.intn(hi-lo+1) }

// float returns a float64 in [0, 1).
func (g *gen) float() float64 { return float64(g.src.Uint64()>>11) / (1 << 53) }

func (g *gen) pick(list []string) string { return list[g.intn(len(list))] }

// round rounds x to the given number of decimals.
func round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}

type category struct {
	name          string
	subcategories []string
	nouns         []string
}

var (
	categories = []category{
		{"Electronics", []string{"Audio", "Cameras", "Accessories"}, []string{"Headphones", "Speaker", "Camera", "Charger", "Monitor"}},
		{"Home & Kitchen", []string{"Cookware", "Furniture", "Storage"}, []string{"Pan", "Chair", "Shelf", "Kettle", "Lamp"}},
		{"Sports & Outdoors", []string{"Camping", "Fitness", "Cycling"}, []string{"Tent", "Backpack", "Bottle", "Helmet", "Mat"}},
		{"Clothing", []string{"Outerwear", "Footwear", "Basics"}, []string{"Jacket", "Sneakers", "T-Shirt", "Hoodie", "Scarf"}},
		{"Office", []string{"Stationery", "Desk", "Paper"}, []string{"Notebook", "Pen Set", "Desk Organizer", "Stapler", "Planner"}},
		{"Toys & Games", []string{"Puzzles", "Board Games", "Building"}, []string{"Puzzle", "Board Game", "Building Set", "Kite", "Yo-Yo"}},
		{"Garden", []string{"Tools", "Planters", "Lighting"}, []string{"Shovel", "Planter", "Hose", "Lantern", "Pruner"}},
		{"Beauty", []string{"Skin Care", "Hair Care", "Fragrance"}, []string{"Face Cream", "Brush", "Hair Dryer", "Perfume", "Mirror"}},
	}
	adjectives = []string{"Ergonomic", "Compact", "Premium", "Classic", "Portable", "Durable", "Lightweight",
		"Rustic", "Modern", "Sleek", "Heavy-Duty", "Eco", "Smart", "Vintage", "Deluxe", "Essential"}
	brands = []string{"Acme", "Northwind", "Contoso", "Globex", "Initech", "Umbrella", "Stark", "Wayne",
		"Hooli", "Vandelay", "Tyrell", "Soylent", "Cyberdyne", "Gringotts", "Wonka", "Oscorp"}
	companySuffixes = []string{"Industries", "Group", "Manufacturing", "Holdings", "Works", "Labs"}
	colors          = []string{"Black", "White", "Silver", "Navy", "Red", "Forest Green", "Sky Blue",
		"Charcoal", "Beige", "Orange", "Teal", "Burgundy", "Graphite", "Sand"}
	materials = []string{"Steel", "Aluminium", "Oak", "Bamboo", "Cotton", "Wool", "Leather",
		"Recycled Plastic", "Glass", "Ceramic", "Polyester", "Silicone", "Carbon Fiber"}
	sizes      = []string{"XS", "S", "M", "L", "XL", "One Size", "Small", "Medium", "Large"}
	currencies = []string{"EUR", "USD", "GBP"}
	countries  = []string{"Germany", "Italy", "Korea", "Japan", "Vietnam", "Portugal", "Mexico",
		"Poland", "Taiwan", "United States", "Canada", "France"}
	tagWords = []string{"new", "bestseller", "eco-friendly", "gift", "sale", "limited", "handmade",
		"waterproof", "wireless", "organic", "travel", "premium", "kids", "outdoor", "indoor",
		"vegan", "recycled", "bundle", "classic", "trending"}
	features = []string{"built to last", "easy to clean", "designed for everyday use",
		"tested by professionals", "backed by our satisfaction promise", "made with care",
		"a customer favourite", "ready to ship"}
)

var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

func (g *gen) product(id int32) *wirelensv1.Product {
	// One draw after another, in a fixed order: the catalog is a pure
	// function of the seed.
	p := &wirelensv1.Product{Id: id, Sku: fmt.Sprintf("SKU-%06d", id)}
	cat := categories[g.intn(len(categories))]
	noun := g.pick(cat.nouns)
	adj := g.pick(adjectives)
	p.Brand = g.pick(brands)
	p.Color = g.pick(colors)
	p.Material = g.pick(materials)
	p.Name = adj + " " + p.Material + " " + noun
	p.Category = cat.name
	p.Subcategory = g.pick(cat.subcategories)
	p.Manufacturer = p.Brand + " " + g.pick(companySuffixes)
	p.Model = fmt.Sprintf("%c%c-%04d", 'A'+g.intn(26), 'A'+g.intn(26), g.intn(10000))
	p.Size = g.pick(sizes)
	p.Price = round(4.99+g.float()*995, 2)
	p.Currency = g.pick(currencies)
	p.DiscountPercent = []float64{0, 5, 10, 15, 20, 25}[g.intn(6)]
	p.StockQuantity = int32(g.between(0, 1000))
	if g.intn(10) == 0 {
		p.StockQuantity = 0
	}
	p.InStock = p.StockQuantity > 0
	p.WeightKg = round(0.05+g.float()*25, 3)
	p.LengthCm = round(5+g.float()*120, 1)
	p.WidthCm = round(5+g.float()*80, 1)
	p.HeightCm = round(1+g.float()*60, 1)
	p.Rating = round(1+g.float()*4, 1)
	p.ReviewCount = int32(g.between(0, 5000))
	p.IsFeatured = g.intn(10) == 0
	p.WarrantyMonths = int32([]int{6, 12, 24, 36}[g.intn(4)])
	for n := g.between(2, 4); len(p.Tags) < n; {
		if t := g.pick(tagWords); !slices.Contains(p.Tags, t) {
			p.Tags = append(p.Tags, t)
		}
	}
	p.Barcode = g.ean13()
	p.CountryOfOrigin = g.pick(countries)
	created := epoch.Add(time.Duration(g.intn(4*365*24*3600)) * time.Second)
	updated := created.Add(time.Duration(g.intn(365*24*3600)) * time.Second)
	p.CreatedAt = created.UnixMilli()
	p.UpdatedAt = updated.Format(time.RFC3339)
	p.Description = fmt.Sprintf("The %s %s by %s in %s: %s, %s. Made of %s in %s, "+
		"it comes with a %d-month warranty and is rated %.1f out of 5 by %d verified customers.",
		strings.ToLower(adj), strings.ToLower(noun), p.Brand, strings.ToLower(p.Color),
		g.pick(features), g.pick(features), strings.ToLower(p.Material), p.CountryOfOrigin,
		p.WarrantyMonths, p.Rating, p.ReviewCount)
	return p
}

// ean13 returns a 13-digit EAN with a valid check digit.
func (g *gen) ean13() string {
	var b strings.Builder
	sum := 0
	for i := range 12 {
		d := g.intn(10)
		if i == 0 {
			d = 4 // GS1 prefixes 40-44: Germany
		}
		if i%2 == 1 {
			sum += 3 * d
		} else {
			sum += d
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteString(strconv.Itoa((10 - sum%10) % 10))
	return b.String()
}
