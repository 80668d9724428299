package dev.wirelens.jvm;

import com.google.protobuf.Empty;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;
import wirelens.v1.CatalogGrpc;
import wirelens.v1.CatalogOuterClass.GetProductRequest;
import wirelens.v1.CatalogOuterClass.ListProductsReply;
import wirelens.v1.CatalogOuterClass.ListProductsRequest;
import wirelens.v1.CatalogOuterClass.Product;
import wirelens.v1.HelloGrpc;
import wirelens.v1.HelloOuterClass.HelloBigReply;
import wirelens.v1.HelloOuterClass.HelloReply;
import wirelens.v1.HelloOuterClass.HelloRequest;
import wirelens.v1.PeopleGrpc;
import wirelens.v1.PeopleOuterClass.Person;
import wirelens.v1.PeopleOuterClass.RegisterBatchReply;

/**
 * The gRPC transport of the JVM pair: grpc-java's Netty server with its defaults (a cached
 * thread pool), serving wirelens.v1.Hello, People and Catalog from the stubs generated from
 * proto/. Every other method answers UNIMPLEMENTED, as grpc-java does for unknown methods.
 */
final class GrpcServer {
    private GrpcServer() {}

    static final class Hello extends HelloGrpc.HelloImplBase {
        @Override
        public void sayHello(HelloRequest req, StreamObserver<HelloReply> out) {
            out.onNext(HelloReply.newBuilder().setMessage(Domain.greeting(req.getName())).build());
            out.onCompleted();
        }

        @Override
        public void sayHelloBig(HelloRequest req, StreamObserver<HelloBigReply> out) {
            out.onNext(HelloBigReply.newBuilder().setMessage(Domain.greeting(req.getName()))
                    .addAllDataList(Domain.BIG_LIST).build());
            out.onCompleted();
        }
    }

    static final class People extends PeopleGrpc.PeopleImplBase {
        @Override
        public void register(Person req, StreamObserver<Empty> out) {
            out.onNext(Empty.getDefaultInstance());
            out.onCompleted();
        }

        @Override
        public StreamObserver<Person> registerBatch(StreamObserver<RegisterBatchReply> out) {
            return new StreamObserver<>() {
                int n;

                @Override
                public void onNext(Person p) {
                    n++;
                }

                @Override
                public void onError(Throwable t) {}

                @Override
                public void onCompleted() {
                    out.onNext(RegisterBatchReply.newBuilder().setCount(n).build());
                    out.onCompleted();
                }
            };
        }
    }

    static final class Catalog extends CatalogGrpc.CatalogImplBase {
        private final Domain.Catalog catalog;

        Catalog(Domain.Catalog catalog) {
            this.catalog = catalog;
        }

        @Override
        public void getProduct(GetProductRequest req, StreamObserver<Product> out) {
            try {
                out.onNext(catalog.get(req.getId()));
                out.onCompleted();
            } catch (Domain.ApiError e) {
                out.onError(Status.fromCode(e.code).withDescription(e.getMessage()).asRuntimeException());
            }
        }

        @Override
        public void listProducts(ListProductsRequest req, StreamObserver<ListProductsReply> out) {
            try {
                out.onNext(ListProductsReply.newBuilder().addAllProducts(catalog.list(req.getCount())).build());
                out.onCompleted();
            } catch (Domain.ApiError e) {
                out.onError(Status.fromCode(e.code).withDescription(e.getMessage()).asRuntimeException());
            }
        }
    }

    static void serve(String host, int port) throws Exception {
        Server server = NettyServerBuilder.forAddress(new InetSocketAddress(host, port))
                .maxInboundMessageSize(64 << 20)
                .addService(new Hello())
                .addService(new People())
                .addService(new Catalog(new Domain.Catalog()))
                .build()
                .start();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                server.shutdown().awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }));
        System.err.println("grpc-java: listening on " + host + ":" + port);
        server.awaitTermination();
    }
}
