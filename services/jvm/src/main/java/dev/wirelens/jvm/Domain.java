package dev.wirelens.jvm;

import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import wirelens.v1.CatalogOuterClass.Product;

/**
 * The domain of the Go pair (internal/hello, people, catalog), ported: the same greeting,
 * the same 1000 items, the same 10,000 products drawn from the same PCG stream in the same order.
 */
final class Domain {
    private Domain() {}

    /** A gRPC-coded failure (internal/apierr). */
    static final class ApiError extends RuntimeException {
        final io.grpc.Status.Code code;

        ApiError(io.grpc.Status.Code code, String message) {
            super(message);
            this.code = code;
        }
    }

    // ---------------------------------------------------------------- hello (E2)
    static final int BIG_ITEMS = 1000;
    static final List<String> BIG_LIST;

    static {
        List<String> items = new ArrayList<>(BIG_ITEMS);
        for (int i = 0; i < BIG_ITEMS; i++) items.add("Item " + i);
        BIG_LIST = Collections.unmodifiableList(items);
    }

    static String greeting(String name) {
        return "Hello, " + name;
    }

    // ---------------------------------------------------------------- catalog (E4)
    static final int SIZE = 10_000;
    static final int DEFAULT_LIST_COUNT = 100;
    static final long SEED1 = 0x77697265L, SEED2 = 0x6c656e73L; // "wire", "lens"

    static final class Catalog {
        final List<Product> products;

        Catalog() {
            products = Collections.unmodifiableList(generate(SEED1, SEED2, SIZE));
        }

        Product get(int id) {
            if (id < 1 || id > products.size()) {
                throw new ApiError(io.grpc.Status.Code.NOT_FOUND,
                        "product " + id + " not found (ids are 1.." + products.size() + ")");
            }
            return products.get(id - 1);
        }

        List<Product> list(int count) {
            if (count == 0) count = DEFAULT_LIST_COUNT;
            if (count < 0 || count > products.size()) {
                throw new ApiError(io.grpc.Status.Code.INVALID_ARGUMENT,
                        "count must be in 0.." + products.size() + ", got " + count);
            }
            return products.subList(0, count);
        }
    }

    private record Category(String name, String[] subcategories, String[] nouns) {}

    private static final Category[] CATEGORIES = {
        new Category("Electronics", new String[] {"Audio", "Cameras", "Accessories"}, new String[] {"Headphones", "Speaker", "Camera", "Charger", "Monitor"}),
        new Category("Home & Kitchen", new String[] {"Cookware", "Furniture", "Storage"}, new String[] {"Pan", "Chair", "Shelf", "Kettle", "Lamp"}),
        new Category("Sports & Outdoors", new String[] {"Camping", "Fitness", "Cycling"}, new String[] {"Tent", "Backpack", "Bottle", "Helmet", "Mat"}),
        new Category("Clothing", new String[] {"Outerwear", "Footwear", "Basics"}, new String[] {"Jacket", "Sneakers", "T-Shirt", "Hoodie", "Scarf"}),
        new Category("Office", new String[] {"Stationery", "Desk", "Paper"}, new String[] {"Notebook", "Pen Set", "Desk Organizer", "Stapler", "Planner"}),
        new Category("Toys & Games", new String[] {"Puzzles", "Board Games", "Building"}, new String[] {"Puzzle", "Board Game", "Building Set", "Kite", "Yo-Yo"}),
        new Category("Garden", new String[] {"Tools", "Planters", "Lighting"}, new String[] {"Shovel", "Planter", "Hose", "Lantern", "Pruner"}),
        new Category("Beauty", new String[] {"Skin Care", "Hair Care", "Fragrance"}, new String[] {"Face Cream", "Brush", "Hair Dryer", "Perfume", "Mirror"}),
    };
    private static final String[] ADJECTIVES = {"Ergonomic", "Compact", "Premium", "Classic", "Portable", "Durable", "Lightweight",
        "Rustic", "Modern", "Sleek", "Heavy-Duty", "Eco", "Smart", "Vintage", "Deluxe", "Essential"};
    private static final String[] BRANDS = {"Acme", "Northwind", "Contoso", "Globex", "Initech", "Umbrella", "Stark", "Wayne",
        "Hooli", "Vandelay", "Tyrell", "Soylent", "Cyberdyne", "Gringotts", "Wonka", "Oscorp"};
    private static final String[] COMPANY_SUFFIXES = {"Industries", "Group", "Manufacturing", "Holdings", "Works", "Labs"};
    private static final String[] COLORS = {"Black", "White", "Silver", "Navy", "Red", "Forest Green", "Sky Blue",
        "Charcoal", "Beige", "Orange", "Teal", "Burgundy", "Graphite", "Sand"};
    private static final String[] MATERIALS = {"Steel", "Aluminium", "Oak", "Bamboo", "Cotton", "Wool", "Leather",
        "Recycled Plastic", "Glass", "Ceramic", "Polyester", "Silicone", "Carbon Fiber"};
    private static final String[] SIZES = {"XS", "S", "M", "L", "XL", "One Size", "Small", "Medium", "Large"};
    private static final String[] CURRENCIES = {"EUR", "USD", "GBP"};
    private static final String[] COUNTRIES = {"Germany", "Italy", "Korea", "Japan", "Vietnam", "Portugal", "Mexico",
        "Poland", "Taiwan", "United States", "Canada", "France"};
    private static final String[] TAG_WORDS = {"new", "bestseller", "eco-friendly", "gift", "sale", "limited", "handmade",
        "waterproof", "wireless", "organic", "travel", "premium", "kids", "outdoor", "indoor",
        "vegan", "recycled", "bundle", "classic", "trending"};
    private static final String[] FEATURES = {"built to last", "easy to clean", "designed for everyday use",
        "tested by professionals", "backed by our satisfaction promise", "made with care",
        "a customer favourite", "ready to ship"};
    private static final double[] DISCOUNTS = {0, 5, 10, 15, 20, 25};
    private static final int[] WARRANTIES = {6, 12, 24, 36};
    private static final long EPOCH_S = Instant.parse("2020-01-01T00:00:00Z").getEpochSecond();

    static List<Product> generate(long seed1, long seed2, int n) {
        Gen g = new Gen(new Pcg(seed1, seed2));
        List<Product> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) out.add(g.product(i + 1));
        return out;
    }

    private static final class Gen {
        final Pcg src;

        Gen(Pcg src) {
            this.src = src;
        }

        int intn(int n) {
            return (int) Long.remainderUnsigned(src.uint64(), n);
        }

        int between(int lo, int hi) {
            return lo + intn(hi - lo + 1);
        }

        double fl() {
            return (double) (src.uint64() >>> 11) / (double) (1L << 53);
        }

        String pick(String[] list) {
            return list[intn(list.length)];
        }

        static double round(double x, int decimals) {
            double p = Math.pow(10, decimals);
            return Math.round(x * p) / p; // x >= 0: half away from zero, as Go's math.Round
        }

        Product product(int id) {
            Product.Builder p = Product.newBuilder().setId(id).setSku(String.format("SKU-%06d", id));
            Category cat = CATEGORIES[intn(CATEGORIES.length)];
            String noun = pick(cat.nouns());
            String adj = pick(ADJECTIVES);
            p.setBrand(pick(BRANDS));
            p.setColor(pick(COLORS));
            p.setMaterial(pick(MATERIALS));
            p.setName(adj + " " + p.getMaterial() + " " + noun);
            p.setCategory(cat.name());
            p.setSubcategory(pick(cat.subcategories()));
            p.setManufacturer(p.getBrand() + " " + pick(COMPANY_SUFFIXES));
            char c1 = (char) ('A' + intn(26));
            char c2 = (char) ('A' + intn(26));
            p.setModel(String.format("%c%c-%04d", c1, c2, intn(10000)));
            p.setSize(pick(SIZES));
            p.setPrice(round(4.99 + fl() * 995, 2));
            p.setCurrency(pick(CURRENCIES));
            p.setDiscountPercent(DISCOUNTS[intn(6)]);
            p.setStockQuantity(between(0, 1000));
            if (intn(10) == 0) p.setStockQuantity(0);
            p.setInStock(p.getStockQuantity() > 0);
            p.setWeightKg(round(0.05 + fl() * 25, 3));
            p.setLengthCm(round(5 + fl() * 120, 1));
            p.setWidthCm(round(5 + fl() * 80, 1));
            p.setHeightCm(round(1 + fl() * 60, 1));
            p.setRating(round(1 + fl() * 4, 1));
            p.setReviewCount(between(0, 5000));
            p.setIsFeatured(intn(10) == 0);
            p.setWarrantyMonths(WARRANTIES[intn(4)]);
            List<String> tags = new ArrayList<>();
            for (int k = between(2, 4); tags.size() < k; ) {
                String t = pick(TAG_WORDS);
                if (!tags.contains(t)) tags.add(t);
            }
            p.addAllTags(tags);
            p.setBarcode(ean13());
            p.setCountryOfOrigin(pick(COUNTRIES));
            long created = EPOCH_S + intn(4 * 365 * 24 * 3600);
            long updated = created + intn(365 * 24 * 3600);
            p.setCreatedAt(created * 1000);
            p.setUpdatedAt(Instant.ofEpochSecond(updated).toString());
            String f1 = pick(FEATURES);
            String f2 = pick(FEATURES);
            p.setDescription(String.format(Locale.ROOT, "The %s %s by %s in %s: %s, %s. Made of %s in %s, "
                    + "it comes with a %d-month warranty and is rated %.1f out of 5 by %d verified customers.",
                    adj.toLowerCase(Locale.ROOT), noun.toLowerCase(Locale.ROOT), p.getBrand(), p.getColor().toLowerCase(Locale.ROOT),
                    f1, f2, p.getMaterial().toLowerCase(Locale.ROOT), p.getCountryOfOrigin(),
                    p.getWarrantyMonths(), p.getRating(), p.getReviewCount()));
            return p.build();
        }

        String ean13() {
            StringBuilder b = new StringBuilder(13);
            int sum = 0;
            for (int i = 0; i < 12; i++) {
                int d = intn(10);
                if (i == 0) d = 4; // GS1 prefixes 40-44: Germany
                sum += (i % 2 == 1) ? 3 * d : d;
                b.append(d);
            }
            b.append((10 - sum % 10) % 10);
            return b.toString();
        }
    }
}
