package dev.wirelens.jvm;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.annotation.Bean;

/**
 * The JVM pair's one jar, three servers:
 *
 *   java -jar wirelens-jvm.jar webflux 127.0.0.1 18082   REST, Spring WebFlux (Reactor Netty)  stack jvm
 *   java -jar wirelens-jvm.jar mvc     127.0.0.1 18083   REST, Spring Web MVC (Tomcat)         stack jvm-mvc
 *   java -jar wirelens-jvm.jar grpc    127.0.0.1 18092   gRPC, grpc-java (Netty)               stack jvm
 */
@SpringBootApplication
public class Main {
    @Bean
    Domain.Catalog catalog() {
        return new Domain.Catalog();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: wirelens-jvm webflux|mvc|grpc HOST PORT");
            System.exit(2);
        }
        String host = args[1];
        int port = Integer.parseInt(args[2]);
        switch (args[0]) {
            case "grpc" -> GrpcServer.serve(host, port);
            case "webflux", "mvc" -> new SpringApplicationBuilder(Main.class)
                    .web(args[0].equals("webflux") ? WebApplicationType.REACTIVE : WebApplicationType.SERVLET)
                    .properties("server.address=" + host, "server.port=" + port,
                            "spring.main.banner-mode=off", "logging.level.root=WARN",
                            "spring.jmx.enabled=false", "server.shutdown=immediate")
                    .run();
            default -> {
                System.err.println("wirelens-jvm: unknown server " + args[0]);
                System.exit(2);
            }
        }
    }
}
