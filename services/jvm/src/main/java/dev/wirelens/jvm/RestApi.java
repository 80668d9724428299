package dev.wirelens.jvm;

import com.google.protobuf.Empty;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.protobuf.Message;
import io.grpc.Status;
import java.util.Locale;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import wirelens.v1.CatalogOuterClass.GetProductRequest;
import wirelens.v1.CatalogOuterClass.ListProductsReply;
import wirelens.v1.CatalogOuterClass.ListProductsRequest;
import wirelens.v1.HelloOuterClass.HelloBigReply;
import wirelens.v1.HelloOuterClass.HelloReply;
import wirelens.v1.HelloOuterClass.HelloRequest;
import wirelens.v1.PeopleOuterClass.Person;

/**
 * The REST transport of the JVM pair: one annotated controller that Spring runs on WebFlux
 * (Reactor Netty, stack jvm) or on Spring Web MVC (Tomcat, stack jvm-mvc). Routes, bodies and
 * errors are the Go REST server's (internal/restserver): the google.api.http route of
 * each operation, compact proto3 JSON (ProtoJson), `Accept: application/protobuf` answers
 * protobuf, a protobuf Content-Type body is decoded as protobuf, errors {"code":N,"message":"..."}
 * with the gRPC code's HTTP status. The handlers do not block, so the same code serves both.
 */
@RestController
class RestApi {
    static final int MAX_BODY_BYTES = 1 << 20;
    private static final MediaType JSON = MediaType.parseMediaType("application/json");
    private static final MediaType TEXT = MediaType.parseMediaType("text/plain; charset=utf-8");

    private final Domain.Catalog catalog;

    RestApi(Domain.Catalog catalog) {
        this.catalog = catalog;
    }

    @GetMapping("/healthz")
    ResponseEntity<byte[]> healthz() {
        return ResponseEntity.ok().contentType(TEXT).body("ok".getBytes());
    }

    @PostMapping("/v1/hello")
    ResponseEntity<byte[]> sayHello(@RequestBody(required = false) byte[] body,
                                    @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
                                    @RequestHeader(value = HttpHeaders.ACCEPT, required = false) String accept) {
        return handle(() -> {
            HelloRequest req = bind(body, contentType, HelloRequest.newBuilder()).build();
            return HelloReply.newBuilder().setMessage(Domain.greeting(req.getName())).build();
        }, accept);
    }

    @PostMapping("/v1/hello-big")
    ResponseEntity<byte[]> sayHelloBig(@RequestBody(required = false) byte[] body,
                                       @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
                                       @RequestHeader(value = HttpHeaders.ACCEPT, required = false) String accept) {
        return handle(() -> {
            HelloRequest req = bind(body, contentType, HelloRequest.newBuilder()).build();
            return HelloBigReply.newBuilder().setMessage(Domain.greeting(req.getName()))
                    .addAllDataList(Domain.BIG_LIST).build();
        }, accept);
    }

    @PostMapping("/v1/person")
    ResponseEntity<byte[]> register(@RequestBody(required = false) byte[] body,
                                    @RequestHeader(value = HttpHeaders.CONTENT_TYPE, required = false) String contentType,
                                    @RequestHeader(value = HttpHeaders.ACCEPT, required = false) String accept) {
        return handle(() -> {
            bind(body, contentType, Person.newBuilder()).build(); // accepted, nothing done with it (E3)
            return Empty.getDefaultInstance();
        }, accept);
    }

    @GetMapping("/v1/products/{id}")
    ResponseEntity<byte[]> getProduct(@PathVariable("id") String id,
                                      @RequestHeader(value = HttpHeaders.ACCEPT, required = false) String accept) {
        return handle(() -> {
            GetProductRequest req = GetProductRequest.newBuilder().setId(int32("id", id)).build();
            return catalog.get(req.getId());
        }, accept);
    }

    @GetMapping("/v1/products")
    ResponseEntity<byte[]> listProducts(@RequestParam(value = "count", required = false) String count,
                                        @RequestHeader(value = HttpHeaders.ACCEPT, required = false) String accept) {
        return handle(() -> {
            ListProductsRequest req = ListProductsRequest.newBuilder()
                    .setCount(count == null ? 0 : int32("count", count)).build();
            return ListProductsReply.newBuilder().addAllProducts(catalog.list(req.getCount())).build();
        }, accept);
    }

    // ---------------------------------------------------------------- plumbing

    interface Call {
        Message run() throws InvalidProtocolBufferException;
    }

    private static int int32(String field, String value) {
        try {
            return Integer.parseInt(value);
        } catch (NumberFormatException e) {
            throw new Domain.ApiError(Status.Code.INVALID_ARGUMENT, "field " + field + ": invalid int32 value \"" + value + "\"");
        }
    }

    static String media(String value) {
        if (value == null) return "";
        int semi = value.indexOf(';');
        return (semi >= 0 ? value.substring(0, semi) : value).trim().toLowerCase(Locale.ROOT);
    }

    static boolean isProtobuf(String media) {
        return media.equals("application/protobuf") || media.equals("application/x-protobuf");
    }

    /** The first protobuf media type the Accept header lists (no q-values weighed, as in Go), or null. */
    static String acceptsProtobuf(String accept) {
        if (accept == null) return null;
        for (String part : accept.split(",")) {
            String m = media(part);
            if (isProtobuf(m)) return m;
        }
        return null;
    }

    private static <B extends Message.Builder> B bind(byte[] body, String contentType, B builder) {
        if (body == null || body.length == 0) return builder; // the empty message, as transcoding does
        if (body.length > MAX_BODY_BYTES) {
            throw new Domain.ApiError(Status.Code.RESOURCE_EXHAUSTED, "request body larger than " + MAX_BODY_BYTES + " bytes");
        }
        if (isProtobuf(media(contentType))) {
            try {
                builder.mergeFrom(body);
            } catch (InvalidProtocolBufferException e) {
                throw new Domain.ApiError(Status.Code.INVALID_ARGUMENT, "invalid protobuf body: " + e.getMessage());
            }
            return builder;
        }
        try {
            return ProtoJson.parse(body, builder);
        } catch (InvalidProtocolBufferException | RuntimeException e) {
            throw new Domain.ApiError(Status.Code.INVALID_ARGUMENT, "invalid JSON body: " + e.getMessage());
        }
    }

    private static ResponseEntity<byte[]> handle(Call call, String accept) {
        Message reply;
        try {
            reply = call.run();
        } catch (Domain.ApiError e) {
            int status = e.code == Status.Code.RESOURCE_EXHAUSTED && e.getMessage().startsWith("request body larger")
                    ? 413 : httpStatus(e.code);
            return ResponseEntity.status(status).contentType(JSON).body(ProtoJson.error(e.code.value(), e.getMessage()));
        } catch (Exception e) {
            return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR).contentType(JSON)
                    .body(ProtoJson.error(Status.Code.INTERNAL.value(), "internal error"));
        }
        String proto = acceptsProtobuf(accept);
        if (proto != null) {
            return ResponseEntity.ok().contentType(MediaType.parseMediaType(proto)).body(reply.toByteArray());
        }
        return ResponseEntity.ok().contentType(JSON).body(ProtoJson.print(reply));
    }

    /** internal/apierr.HTTPStatus. */
    static int httpStatus(Status.Code c) {
        return switch (c) {
            case OK -> 200;
            case CANCELLED -> 499;
            case INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE -> 400;
            case DEADLINE_EXCEEDED -> 504;
            case NOT_FOUND -> 404;
            case ALREADY_EXISTS, ABORTED -> 409;
            case PERMISSION_DENIED -> 403;
            case UNAUTHENTICATED -> 401;
            case RESOURCE_EXHAUSTED -> 429;
            case UNIMPLEMENTED -> 501;
            case UNAVAILABLE -> 503;
            default -> 500;
        };
    }
}
